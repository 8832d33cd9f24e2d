#!/usr/bin/env python3
"""Where halo3d's time goes: per directed link loads, message counts and latencies of
one iteration under the placements of a ``run_benefit.py`` / ``rankmap simulate`` case,
and time models checked against the simulated time.

halo3d posts all its receives and sends of an iteration at once (6 faces a rank),
waits for all of them, and has no barrier inside the loop: an iteration lasts as long
as its slowest message, and the links carry all the iteration's messages at once.

SimGrid's SMPI network model (3.32 defaults, ``smpirun --help``) shares each link among
the flows crossing it by *weighted* max-min (a flow's weight is 1 / (route latency +
Σ_links weight_S / bandwidth), weight_S = 20537), lets a message of s bytes use only
bw_factor(s) of what it is given (0.94 at 256 KiB, 0.34 from 242 B to 1.4 KB, 0.81
below), delays it by latency × lat_factor(s) (11.6 at 256 KiB, 1.95 at 1 KiB), and,
with cross-traffic on, charges every flow 5 % of its rate on the links of the reverse
route.  Links are full duplex (SPLITDUPLEX: one capacity per direction); a leaf's
backbone is shared.  The factors are looked up as if a message were FACTOR_SHIFT bytes
longer, which is what SimGrid 3.32 was measured to do.

Models of one iteration (× iterations to compare with the simulated loop):

* ``links``: rankmap's own busiest load per level (``mapper.objectives.congestion``, the
  ``busiest_links`` of results.json) over that level's link capacity, the largest
  level — levels compared through their capacities (a ratio to block's);
* ``uplink``: bytes of the busiest directed uplink / its bandwidth;
* ``estimate``: max over directed links of (bytes + 0.05 × reverse bytes) /
  (bandwidth × bw_factor) + the longest route latency × lat_factor;
* ``fluid``: SimGrid's fluid model of one iteration (weighted max-min, bounds,
  latencies, cross-traffic), solved by progressive filling from event to event.

Usage: ``python3 bench/benefit/halo_links.py CASE [CASE …]`` (case directories with
results.json, platform.xml and the hostfiles; halo3d's arguments are read from
results.json's program); ``--sizes B …`` prints the estimate's ratio to block per
message size instead (the models only, on the case's hostfiles).
"""

from __future__ import annotations

import argparse
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

WEIGHT_S = 20537.0
CROSS = 0.05
BW_FACTOR = "65472:0.940694;15424:0.697866;9376:0.58729;5776:1.08739;3484:0.77493;" \
    "1426:0.608902;732:0.341987;257:0.338112;0:0.812084"
LAT_FACTOR = "65472:11.6436;15424:3.48845;9376:2.59299;5776:2.18796;3484:1.88101;" \
    "1426:1.61075;732:1.9503;257:1.95341;0:2.01467"


#: SimGrid 3.32 looks the factors up as if a message were this much longer (measured
#: with halo3d: 241-byte messages get the factor of bracket 0, 242-byte ones that of
#: bracket 257, every other cfg left at its default)
FACTOR_SHIFT = 16


def factor(table: str, size: float) -> float:
    """SMPI's piecewise factor of a message of ``size`` bytes: the value of the largest
    threshold below size + FACTOR_SHIFT."""
    for item in table.split(";"):
        thresh, value = item.split(":")
        if size + FACTOR_SHIFT > float(thresh):
            return float(value)
    return 1.0


def halo_messages(program: list[str]) -> tuple[np.ndarray, np.ndarray, int, int]:
    """(src, dst) of one iteration's messages, bytes per message, iterations."""
    dims, periodic, nbytes, iters = None, False, 65536, 20
    i = 1
    while i < len(program):
        a = program[i]
        if a == "-d":
            dims = tuple(int(x) for x in program[i + 1].split("x"))
            i += 1
        elif a == "-p":
            periodic = True
        elif a == "-b":
            nbytes = int(program[i + 1])
            i += 1
        elif a == "-i":
            iters = int(program[i + 1])
            i += 1
        i += 1
    if dims is None:
        raise SystemExit(f"not a halo3d command: {program}")
    coords = np.stack(np.unravel_index(np.arange(int(np.prod(dims))), dims), axis=1)
    src, dst = [], []
    for r, c in enumerate(coords):
        for ax in range(3):
            for step in (-1, 1):
                d = c.copy()
                d[ax] += step
                if not 0 <= d[ax] < dims[ax]:
                    if not periodic or dims[ax] <= 2:
                        continue
                    d[ax] %= dims[ax]
                peer = int(np.ravel_multi_index(d, dims))
                if peer != r:
                    src.append(r)
                    dst.append(peer)
    return np.array(src), np.array(dst), nbytes, iters


def seconds(text: str) -> float:
    """'1e-06s' → 1e-06."""
    return float(re.sub(r"[a-zA-Z]+$", "", text))


def bandwidth(text: str) -> float:
    """'12500000000Bps' → 1.25e10."""
    return float(text.removesuffix("Bps"))


class Platform:
    """The links of a ``rankmap simulate`` platform.xml: per host its cluster; per
    cluster host link, backbone and loopback; uplinks and the zone routes."""

    def __init__(self, path: Path):
        root = ET.parse(path).getroot()
        self.cluster_of: dict[int, str] = {}
        self.cl: dict[str, dict] = {}
        for c in root.iter("cluster"):
            lo, _, hi = c.get("radical").partition("-")
            for h in range(int(lo), int(hi or lo) + 1):
                self.cluster_of[h] = c.get("id")
            self.cl[c.get("id")] = dict(
                bw=bandwidth(c.get("bw")), lat=seconds(c.get("lat")),
                bb_bw=bandwidth(c.get("bb_bw")), bb_lat=seconds(c.get("bb_lat", "0s")),
                lo_bw=bandwidth(c.get("loopback_bw")), lo_lat=seconds(c.get("loopback_lat")))
        self.up = {x.get("id"): (bandwidth(x.get("bandwidth")), seconds(x.get("latency")))
                   for x in root.iter("link")}
        self.routes = {(z.get("src"), z.get("dst")):
                       [(x.get("id"), x.get("direction")) for x in z.iter("link_ctn")]
                       for z in root.iter("zoneRoute")}
        # capacity per level, innermost first: host link, then the k-th uplink of the
        # routes that climb at least k levels (the slowest of each level)
        hosts = min(c["bw"] for c in self.cl.values())
        self.level_caps = [hosts]
        for route in self.routes.values():
            for k, (lid, _) in enumerate(route[:len(route) // 2], start=1):
                if len(self.level_caps) <= k:
                    self.level_caps.append(self.up[lid][0])
                self.level_caps[k] = min(self.level_caps[k], self.up[lid][0])

    def route(self, a: int, b: int) -> list[tuple[tuple, float, float]]:
        """[(directed link key, bandwidth, latency)] from host a to host b."""
        ca, cb = self.cluster_of[a], self.cluster_of[b]
        A, B = self.cl[ca], self.cl[cb]
        if a == b:
            return [(("loopback", a), A["lo_bw"], A["lo_lat"])]
        out = [(("node", a, "out"), A["bw"], A["lat"]), (("backbone", ca), A["bb_bw"], A["bb_lat"])]
        if ca != cb:
            for lid, direction in self.routes[(ca, cb)]:
                bw, lat = self.up[lid]
                out.append((("uplink", lid, direction), bw, lat))
            out.append((("backbone", cb), B["bb_bw"], B["bb_lat"]))
        out.append((("node", b, "in"), B["bw"], B["lat"]))
        return out


def fill(active: np.ndarray, weights: np.ndarray, bounds: np.ndarray, incid,
         caps: np.ndarray) -> np.ndarray:
    """Weighted max-min rates of the ``active`` flows (progressive filling): every free
    flow f gets weights[f] · level until a link it uses saturates (incid: links × flows,
    sparse, coefficient per unit of rate) or its bound is reached."""
    rate = np.zeros(len(weights))
    free = active.copy()
    left = caps.astype(float).copy()
    room = bounds.astype(float).copy()
    while free.any():
        idx = np.flatnonzero(free)
        sub = incid[:, idx]
        use = sub @ weights[idx]
        with np.errstate(divide="ignore", invalid="ignore"):
            lvl_links = np.where(use > 0, left / use, np.inf)
        lvl_bound = room[idx] / weights[idx]
        lvl = min(lvl_links.min(), lvl_bound.min())
        rate[idx] += weights[idx] * lvl
        room[idx] -= weights[idx] * lvl
        left = np.maximum(left - use * lvl, 0.0)
        sat = lvl_links <= lvl * (1 + 1e-9)
        frozen = lvl_bound <= lvl * (1 + 1e-9)
        if sat.any():
            frozen |= np.asarray((sub[np.flatnonzero(sat)] > 0).sum(axis=0)).ravel() > 0
        free[idx[frozen]] = False
    return rate


def fluid(sizes: np.ndarray, starts: np.ndarray, weights: np.ndarray, bounds: np.ndarray,
          incid, caps: np.ndarray, bwf: np.ndarray) -> float:
    """End of the last flow: each starts when its latency is paid, then progresses at
    its max-min rate × bw_factor; rates are recomputed at every start and end."""
    remain = sizes.astype(float).copy()
    done = np.zeros(len(sizes), bool)
    t = 0.0
    while not done.all():
        active = ~done & (starts <= t * (1 + 1e-12))
        rate = fill(active, weights, bounds, incid, caps) * bwf
        with np.errstate(divide="ignore"):
            finish = np.where(active & (rate > 0), remain / np.maximum(rate, 1e-300), np.inf)
        later = starts[~done & ~active]
        dt = min(finish.min(), later.min() - t if later.size else np.inf)
        remain[active] -= rate[active] * dt
        t += dt
        done |= active & (remain <= sizes * 1e-9)
    return t


def analyse(case: Path, size: int | None = None, with_fluid: bool = True) -> list[dict]:
    """One row per placement of ``case`` (``size``: bytes per message instead of the
    program's, for the models only; ``with_fluid``: also solve the fluid model)."""
    from scipy.sparse import csr_matrix

    rec = json.loads((case / "results.json").read_text())
    plat = Platform(case / "platform.xml")
    src, dst, nbytes, iters = halo_messages(rec["program"])
    if size is not None:
        nbytes = size
    bwf, latf = factor(BW_FACTOR, nbytes), factor(LAT_FACTOR, nbytes)
    rows = []
    for p in rec["placements"]:
        hosts = np.array([int(h.strip().lstrip("h"))
                          for h in Path(p["hostfile"]).read_text().split()])
        a, b = hosts[src], hosts[dst]
        keys: dict[tuple, int] = {}
        cap, ij, coef = [], [], []
        lat = np.zeros(len(src))
        pen = np.zeros(len(src))
        bound = np.full(len(src), np.inf)
        for f, (x, y) in enumerate(zip(a, b, strict=True)):
            fwd = plat.route(int(x), int(y))
            back = plat.route(int(y), int(x))
            lat[f] = sum(link[2] for link in fwd)
            pen[f] = lat[f] + sum(WEIGHT_S / link[1] for link in fwd)
            bound[f] = min(link[1] for link in fwd)
            for route, c in ((fwd, 1.0), (back, CROSS)):
                for key, bw, _ in route:
                    if key[0] == "loopback":
                        continue  # a cluster's loopback is a FATPIPE: bound only
                    if key not in keys:
                        keys[key] = len(cap)
                        cap.append(bw)
                    ij.append((keys[key], f))
                    coef.append(c)
        cap = np.array(cap)
        li, fi = np.array(ij).T
        incid = csr_matrix((coef, (li, fi)), shape=(len(cap), len(src)))
        fwd_only = csr_matrix((np.where(np.array(coef) == 1.0, 1.0, 0.0), (li, fi)),
                              shape=(len(cap), len(src)))
        msgs = np.asarray(fwd_only.sum(axis=1)).ravel()
        load = msgs * nbytes
        eff = np.asarray(incid.sum(axis=1)).ravel() * nbytes  # with 5 % cross-traffic
        kinds = [k[0] for k in keys]
        busiest = {}
        for kind in ("node", "uplink", "backbone"):
            sel = [i for i, k in enumerate(keys) if k[0] == kind]
            if not sel:
                continue
            j = max(sel, key=lambda i: load[i] / cap[i])
            busiest[kind] = dict(key=list(keys)[j], bytes=load[j], msgs=int(msgs[j]),
                                 seconds=load[j] / cap[j])
        # the uplink model and the bound
        up = busiest.get("uplink", {"seconds": 0.0})["seconds"]
        per_link = eff / (cap * bwf)
        bound_t = per_link.max() + lat.max() * latf
        sizes = np.full(len(src), float(nbytes))
        fl = (fluid(sizes, lat * latf, 1.0 / pen, bound, incid, cap, np.full(len(src), bwf))
              if with_fluid else np.nan)
        cross = np.array([plat.cluster_of[int(x)] != plat.cluster_of[int(y)]
                          for x, y in zip(a, b, strict=True)])
        links = max(v / c for v, c in zip(p["busiest_links"].values(), plat.level_caps,
                                           strict=False))
        rows.append(dict(
            links=links, name=p["name"], simulated=p["seconds"], iters=iters, bytes=nbytes,
            busiest=busiest, uplink=up * iters, estimate=bound_t * iters, fluid=fl * iters,
            cross_msgs=int(cross.sum()), lat_max=lat.max(), latf=latf, bwf=bwf,
            node_msgs=int(max((msgs[i] for i, k in enumerate(kinds) if k == "node"),
                              default=0)),
            J=p["J"]))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("cases", type=Path, nargs="+")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    ap.add_argument("--sizes", type=int, nargs="+", metavar="BYTES",
                    help="instead: the estimate's ratio to block per message size")
    args = ap.parse_args()
    if args.sizes:
        print("| case | placement | " + " | ".join(f"{s} B" for s in args.sizes) + " |")
        print("|---|---|" + "---|" * len(args.sizes))
        for case in args.cases:
            per = [analyse(case, s, with_fluid=False) for s in args.sizes]
            for i, r in enumerate(per[0][1:], start=1):
                if r["simulated"] is None:
                    continue
                cells = " | ".join(f"{rows[i]['estimate'] / rows[0]['estimate']:.3f}"
                                   for rows in per)
                print(f"| {case.name} | {r['name']} | {cells} |")
        return 0
    out = []
    print("| case | placement | simulated ms | ratio | busiest node link: msgs, µs "
          "| busiest uplink: msgs, µs | uplink ms | estimate ms | fluid ms "
          "| fluid ratio | links ratio | J ratio |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for case in args.cases:
        rows = analyse(case)
        out.append({"case": str(case), "rows": rows})
        base = rows[0]
        for r in rows:
            sim = r["simulated"]
            node = r["busiest"]["node"]
            upl = r["busiest"].get("uplink")
            ups = (f"{upl['msgs']} ({upl['key'][1]} {upl['key'][2].lower()}), "
                   f"{1e6 * upl['seconds']:.1f}" if upl else "-")
            ratio = "-" if sim is None or base["simulated"] is None else \
                f"{sim / base['simulated']:.3f}"
            print(f"| {case.name} {r['bytes']} B | {r['name']} | "
                  f"{'-' if sim is None else f'{1e3 * sim:.4g}'} | {ratio} | "
                  f"{node['msgs']} ({node['key'][2]}), {1e6 * node['seconds']:.1f} | {ups} | "
                  f"{1e3 * r['uplink']:.4g} | {1e3 * r['estimate']:.4g} | {1e3 * r['fluid']:.4g} | "
                  f"{r['fluid'] / base['fluid']:.3f} | {r['links'] / base['links']:.3f} | "
                  f"{r['J'] / base['J']:.3f} |", flush=True)
    if args.json:
        print(json.dumps(out, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
