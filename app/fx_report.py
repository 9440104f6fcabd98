"""The report of a compiled run's graphs (`agdb fx --torch`): text for a terminal, and the JSON contract.

Each compile is reported on its own: its graphs (joint, forward, backward, with nested subgraphs indented under
the graph that holds them), the forward-to-backward map of its joint graph and subgraphs (tracer/fx/family_map.py),
and the anomalies of that map. The forward and backward graphs the backend received are checked too, and what they
break that the joint did not (a pass between the two, the partitioner) is reported as theirs. docs/fx.md, "The
run's own graphs"; the JSON's schema is docs/fx-graphs.schema.json.
"""
from __future__ import annotations

import sys
from typing import Any, TextIO

from agdb.tracer.fx.family_map import FamilyAnomaly, family_anomalies, family_map
from agdb.tracer.fx.graph_set import GraphEntry, GraphSet

REPORT_FORMAT = "agdb.fx-report/2"
_SHOWN_META = ("seq_nr", "partitioner_tag", "custom", "autograd_backward")


def anomalies_of(found: GraphSet) -> list[FamilyAnomaly]:
    """The anomalies of every compile: its joint family's, then those the partition graphs add."""
    out: list[FamilyAnomaly] = []
    for c in found.compiles:
        joint = [e for e in found.roots("joint") if e.compile == c.index]
        seen: set[tuple[str, tuple[str, ...]]] = set()
        for root in joint:
            for a in family_anomalies(_members(found, root)):
                out.append(a)
                seen.add((a.kind, a.nodes))
        for root in joint:
            out.extend(_shifted(root))
        parts = [m for e in found.roots() if e.compile == c.index and e.kind in ("forward", "backward")
                 for m in _members(found, e)]
        if parts and joint:  # an inference compile has no backward to map to
            out.extend(a for a in family_anomalies(parts) if (a.kind, a.nodes) not in seen)
    return out


def _shifted(root: GraphEntry) -> list[FamilyAnomaly]:
    """The `shifted` anomalies of a joint graph agdb traced itself (a marked target), whose `info["bumps"]` hold the
    sequence-number increments no FX node made, with their lines (tracer/fx/seq_map.py)."""
    from agdb.tracer.fx.seq_map import anomalies

    return [FamilyAnomaly(a.kind, root.id, a.nodes, a.message + "".join(
        f" (culprit: {file}:{line} in {fn})" for file, line, fn, _ in a.culprits), a.seq_nr)
        for a in anomalies(root.graph) if a.kind == "shifted"]


def _members(found: GraphSet, root: GraphEntry) -> list[tuple[str, Any]]:
    return [(e.id, e.graph) for e in found.family(root.id)]


def maps_of(found: GraphSet) -> list[dict]:
    """Each joint family's map: seq_nr, the forward node and its backward nodes, each as [graph id, node name]."""
    out = []
    for root in found.roots("joint"):
        members = _members(found, root)
        m = family_map(members)
        backward: dict[int, list[list[str]]] = {}
        for (graph_id, name), (_, f) in m.partner.items():
            backward.setdefault(f.meta["seq_nr"], []).append([graph_id, name])
        order = {(gid, n.name): i for i, (gid, g) in enumerate(members) for n in g.nodes}
        pairs = [{"seq_nr": s, "forward": [gid, f.name],
                  "backward": sorted(backward.get(s, []), key=lambda p: order[(p[0], p[1])])}
                 for s, (gid, f) in sorted(m.forward_of_seq.items(), key=lambda kv: order[(kv[1][0], kv[1][1].name)])]
        out.append({"graph": root.id, "pairs": pairs})
    return out


def line_of(found: GraphSet, a: FamilyAnomaly) -> dict | None:
    """Where the anomaly's first node came from: the innermost frame of its `stack_trace` as torch recorded it
    (Dynamo gives forward nodes the user's line, backward nodes their forward node's), or None."""
    from agdb.tracer.fx.python_op_view import frames_of

    try:
        graph = found.entry(a.graph).graph
        frames = frames_of(graph.node(a.nodes[0]).meta.get("stack_trace") or "")
    except KeyError:
        return None
    if not frames:
        return None
    f = frames[-1]
    return {"file": f.file, "line": f.line, "function": f.function, "code": f.code}


def report_json(found: GraphSet, script: str) -> dict:
    """The JSON contract (docs/fx.md): graphs, anomalies, and beside them the compiles, maps and notes."""
    data = found.to_json()
    data.update({"format": REPORT_FORMAT, "source": "torch", "script": script, "maps": maps_of(found),
                 "anomalies": [{**a.to_json(), "line": line_of(found, a),
                                **({"taken_by": found.takers.get(a.seq_nr)} if found.takers else {})}
                               for a in anomalies_of(found)]})
    return data


def print_graphs(found: GraphSet, script: str, partitions: bool, out: TextIO | None = None) -> None:
    """Each compile: its graphs listed, the joint graph and its subgraphs as code, the map, the anomalies."""
    out = out or sys.stdout
    n = len(found.compiles)
    out.write(f"real PyTorch: {n} AOTAutograd compile{'s' if n != 1 else ''} in {script}'s own run, "
              f"{len(found)} graph{'s' if len(found) != 1 else ''}\n")
    for note in found.notes:
        out.write(f"note: {note}\n")
    anomalies = anomalies_of(found)
    maps = {m["graph"]: m for m in maps_of(found)}
    for c in found.compiles:
        roots = [e for e in found.roots() if e.compile == c.index]
        out.write(f"\n== {c.title()}{' (inference: nothing needed a gradient)' if c.inference else ''}\n")
        for e in roots:
            subs = [s.name for s in found.family(e.id)[1:]]
            more = f"; subgraphs {', '.join(subs)}" if subs else ""
            out.write(f"  {e.kind} graph {e.id}: {len(e.graph)} nodes{more}\n")
        for e in roots:
            if e.kind == "joint" or (partitions or c.inference):
                _print_family(found, e, out)
            if e.id in maps:
                _print_map(maps[e.id], e.id, out)
        mine = _grouped([a for a in anomalies if a.graph.split(".", 1)[0] == f"c{c.index}"])
        if not c.inference:
            out.write(f"\nanomalies: {len(mine) or 'none'}\n")
        for a in mine:
            out.write(f"  [{a.kind}] {a.message}\n")
            line = line_of(found, a)
            if line is not None:
                out.write(f"      at {line['file']}:{line['line']} in {line['function']}: {line['code']}\n")
            taken = found.takers.get(a.seq_nr) if a.seq_nr is not None else None
            if taken:
                out.write(f"      seq_nr {a.seq_nr} was taken while torch traced, in:\n")
                out.writelines(f"        {f['file']}:{f['line']} in {f['function']}: {f['code']}\n" for f in taken)


def _grouped(anomalies: list[FamilyAnomaly], at: int = 4) -> list[FamilyAnomaly]:
    """Gradient sums of one graph said once when there are `at` or more (the JSON keeps each)."""
    sums: dict[str, list[FamilyAnomaly]] = {}
    for a in anomalies:
        if a.kind == "gradient_acc":
            sums.setdefault(a.graph, []).append(a)
    out = []
    for a in anomalies:
        group = sums.get(a.graph, []) if a.kind == "gradient_acc" else []
        if len(group) < at:
            out.append(a)
        elif a is group[0]:
            names = [x.nodes[0] for x in group]
            numbers = sorted({x.seq_nr for x in group if x.seq_nr is not None})
            out.append(FamilyAnomaly("gradient_acc", a.graph, tuple(names), f"{len(names)} gradient sums in "
                                     f"{a.graph} ({', '.join(names)}), seq_nr {', '.join(map(str, numbers))}: they "
                                     "relate to no forward node", numbers[0] if numbers else None))
    return out


def _print_family(found: GraphSet, root: GraphEntry, out: TextIO) -> None:
    depth = {root.id: 0}
    for e in found.family(root.id):
        if e.parent is not None:
            depth[e.id] = depth[e.parent] + 1
        pad = "    " * depth[e.id]
        title = f"{e.kind} graph {e.id}" if e.parent is None else f"subgraph {e.name} of {e.parent}"
        out.write(f"\n{pad}{title}:\n")
        text = e.graph.print_readable(meta_keys=_SHOWN_META).replace("class joint(", f"class {e.name}(", 1)
        out.write("".join(pad + line + "\n" for line in text.splitlines()))


def _print_map(m: dict, root_id: str, out: TextIO) -> None:
    def name(pair: list[str]) -> str:
        graph_id, node = pair
        return node if graph_id == root_id else f"{graph_id.rsplit('/', 1)[-1]}.{node}"

    out.write(f"\nforward -> backward (by seq_nr, {root_id} and its subgraphs, as torch's "
              "copy_fwd_metadata_to_bw_nodes maps them):\n")
    for p in m["pairs"]:
        out.write(f"  {p['seq_nr']:>4}  {name(p['forward'])} -> {', '.join(name(b) for b in p['backward']) or '(none)'}"
                  "\n")
