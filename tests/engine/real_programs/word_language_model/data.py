# Vendored from https://github.com/pytorch/examples, word_language_model/data.py, commit 77f55b912142e11fcfdf5b530231fb9c52f181e8.
# Licence: BSD 3-Clause, Copyright (c) 2017, Pytorch contributors; the full notice is in ../licenses/pytorch-examples.LICENSE.
# Edits (sizes and data only; each changed line marked "# EDIT"):
# - the corpus files (wikitext-2, read from disk) replaced by three short synthetic texts held in `_TEXT`, read through io.StringIO; the existence check of the file removed.
import os
import io  # EDIT
from io import open
import torch

_TEXT = {  # EDIT: synthetic stand-ins for wikitext-2's train.txt, valid.txt and test.txt
    'train.txt': 'the cat sat on the mat\nthe dog sat on the log\na cat and a dog ran\nthe mat and the log\n',
    'valid.txt': 'the dog sat on the mat\na cat ran\n',
    'test.txt': 'the cat ran on the log\na dog sat\n',
}

class Dictionary(object):
    def __init__(self):
        self.word2idx = {}
        self.idx2word = []

    def add_word(self, word):
        if word not in self.word2idx:
            self.idx2word.append(word)
            self.word2idx[word] = len(self.idx2word) - 1
        return self.word2idx[word]

    def __len__(self):
        return len(self.idx2word)


class Corpus(object):
    def __init__(self, path):
        self.dictionary = Dictionary()
        self.train = self.tokenize(os.path.join(path, 'train.txt'))
        self.valid = self.tokenize(os.path.join(path, 'valid.txt'))
        self.test = self.tokenize(os.path.join(path, 'test.txt'))

    def tokenize(self, path):
        """Tokenizes a text file."""
        # Add words to the dictionary
        with io.StringIO(_TEXT[os.path.basename(path)]) as f:  # EDIT
            for line in f:
                words = line.split() + ['<eos>']
                for word in words:
                    self.dictionary.add_word(word)

        # Tokenize file content
        with io.StringIO(_TEXT[os.path.basename(path)]) as f:  # EDIT
            idss = []
            for line in f:
                words = line.split() + ['<eos>']
                ids = []
                for word in words:
                    ids.append(self.dictionary.word2idx[word])
                idss.append(torch.tensor(ids).type(torch.int64))
            ids = torch.cat(idss)

        return ids
