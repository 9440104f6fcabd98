# Vendored from https://github.com/karpathy/minGPT, mingpt/__init__.py, commit 37baab71b9abea1b76ab957409a1cc2fbfba8a26.
# Licence: MIT, Copyright (c) 2020 Andrej Karpathy; the full notice is in ../../licenses/minGPT.LICENSE.
# Edits: none.
