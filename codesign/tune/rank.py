"""Which neighbours of a centre the `vta` family's local search times first (`LocalTuner(ranked=True)`,
the family stage of the default search, `template_local`), ranked before any is timed.

A sweep trial affords about 16 family measurements per layer (a vta-family measurement costs ~4 ms
of CPU against ~0.3 ms for a template one), while the template optimum has 100-300 valid one-knob
neighbours: in a random order the search spends its budget on tile and fold moves. The fastest
schedules known for ResNet-18's layers (1,000-measurement learned searches, pynq_1x16 and pynq_4x8)
differ from the template optimum's point mostly in the knobs the templates do not have: the GEMM
kernel skipping padding taps (`pad_skip`), every micro-op kernel loaded once (`uop_preload`), the
epilogue overlapped with the next tile (`early_epilogue`), then residency (`inp_stationary`,
`acc_resident`, `wgt_stationary`) and the loop nest (`vthread`, `order`); the tiles, mostly, the
template stage has already chosen. So moves of those knobs come first, in `MOVE_ORDER`, each
group in a seeded random order; then every other move. The search stays best-first: an improving
move makes a new centre whose neighbours are ranked the same way, so three kernel knobs set on the
template optimum cost about three measurements.

The template stage also ranked the tilings: the best known schedules' tiles are mostly among the
template's ten fastest (ResNet-18 on pynq_1x16: 8 of 12 layers), not always its fastest. So a
centre whose non-tile knobs differ from a template point's also has as neighbours its
*transplants*: its non-tile knobs on the tiles of the template stage's `TRANSPLANTS` fastest
tilings, fastest first, ranked right after the kernel knobs' moves (`TRANSPLANT_RANK`).

Three refinements, for designs whose layers gain little from those knobs (ResNet-18 on
pynq_4x8_i8w8a32_15_14_16_15_167MHz: the static order spent a trial's measurements on kernel-knob
values that changed nothing and never reached the tile_ci split worth 5-20% per layer; 468 -> 428 ms
per request at the same measurements, no stock config slower; docs/results.md "Trial quality"):
- a move that resets a knob the centre has set (`uop_fold`/`uop_lift` drop `pad_skip`, a coupled group)
  undoes the search's own find: it ranks after every other move (`move_ranks`);
- the tile moves come each tile knob's nearest split first, in turn (`tile_steps`), not at random;
- the order learns from the trial's own measurements (`RankedFrontier`, `flat_knobs`): a knob whose
  `FLAT_TRIES` moves from position 0 paid less than `FLAT_TOL` on this layer has its further moves
  ranked after the tile moves.

Compound moves (`compound_moves`), for the designs whose best schedules differ from the template optimum in
several knobs at once (ResNet-18 on pynq_4x8 at 167 MHz: its 64-channel 3x3 conv 21.7 ms with WGT resident,
loop order 3, the whole reduction in one tile and other h/w/co tiles, against 29.6 ms; one-knob moves do not
get there: residency alone is invalid while the reduction is split, and the whole reduction's input tile
overflows the buffer with the template's tiles): a residency knob set with the loop orders that give its
operand reuse and the tiles that go with it, picked per knob among their every valid tiling by a DMA estimate
from the features (`dma_estimate`, no program built), once per layer, ranked after the GEMM kernel knobs
(`COMPOUND_RANK`). ResNet-18 whole network, default sweep trial: 428.1 -> 380.2 ms on that design, within
1.6% of the best known on the six designs of docs/results.md "Trial quality", none slower, same CPU."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np

from codesign.schedule.features import CONFIG_FEATURE_NAMES
from codesign.schedule.vta.knobs import EXTRA_FEATURE_NAMES, ORDERS, TILE_KNOBS
from codesign.tune.measure import MeasureResult
from codesign.tune.view import SpaceView
from codesign.vta.timing import TimingParams

#: The knobs whose one-knob moves are timed first, in this order (module doc); every other knob after.
MOVE_ORDER: tuple[str, ...] = ("pad_skip", "uop_preload", "early_epilogue", "inp_stationary", "acc_resident",
                               "wgt_stationary", "vthread", "order", "n_threads", "uop_fold", "uop_lift")

#: Template tilings a centre is transplanted onto (the template stage's fastest, fastest first).
TRANSPLANTS = 4
#: Where transplants rank among the one-knob moves: after `MOVE_ORDER`'s first three (the GEMM kernel's).
TRANSPLANT_RANK = 2.5
#: A knob is flat on a layer once `FLAT_TRIES` measured moves of it off position 0 paid less than `FLAT_TOL`
#: (relative) each (`flat_knobs`). 2 tries: the pynq_4x8 167 MHz trial 3.4% faster too, but the stock
#: pynq_1x16 0.6% and pynq_4x8 0.5% slower (a third value of a knob pays there); 4: less of the gain.
FLAT_TRIES = 3
FLAT_TOL = 0.005

#: Compound moves (`compound_moves`): a residency knob set together with the loop orders that give its
#: operand reuse (batch outermost; weights: co outside both spatial loops, inputs: co inside them).
STATIONARY: dict[str, tuple[int, ...]] = {
    "wgt_stationary": tuple(k for k, o in enumerate(ORDERS) if o[0] == "b" and o.index("co") == 1),
    "inp_stationary": tuple(k for k, o in enumerate(ORDERS) if o[0] == "b" and o.index("co") == 3)}
#: The knobs a compound move sets (`compound_moves`); `apply_compound` carries them onto a later centre.
SHAPE_KNOBS = TILE_KNOBS + ("order", "wgt_stationary", "inp_stationary", "uop_fold", "uop_lift", "acc_resident")
#: Where a compound move ranks among a centre's moves: after the GEMM kernel knobs' (`MOVE_ORDER`'s first
#: three), before the transplants. Ranked first, a compound that beats the template optimum but not the
#: template optimum with its kernel knobs set traps the best-first search (stock pynq_1x16's stride-2 1x1
#: convs 0.91 -> 1.09 ms); after them it carries the centre's kernel knobs (`apply_compound`).
COMPOUND_RANK = 2.25
#: A compound move is proposed only when its `dma_estimate` is at most this times the centre's: the paying
#: compounds of ResNet-18 on pynq_4x8 at 167 MHz were at 0.95-1.13, three that did not at 1.11-1.28.
COMPOUND_SLACK = 1.15
#: The centre's knobs a compound move resets where it is invalid with them (the threads; the padding skip,
#: whose kernel the new tiles may not allow: ResNet-18's stride-2 3x3 conv on pynq_4x8 at 167 MHz, 19.3 ->
#: 15.0 ms once `pad_skip` is off).
RESET_KNOBS = ("vthread", "early_epilogue", "pad_skip", "n_threads")
_FEATURES = list(CONFIG_FEATURE_NAMES) + list(EXTRA_FEATURE_NAMES)


def _raw_features(view: SpaceView, idx: np.ndarray) -> np.ndarray:
    """The space's features of `idx` as computed (log2 counts, fractions), not squashed for a model."""
    return np.asarray(view.space.features_batch(idx), dtype=np.float64)


def dma_estimate(view: SpaceView, indices: Sequence[int] | np.ndarray, feats: np.ndarray | None = None) -> np.ndarray:
    """Per config, the cycles of its DMA by the timing model's default DMA terms (bytes at the DRAM
    efficiency, a fixed latency per LOAD/STORE), from the family's features alone (no program is built):
    INP bytes, WGT bytes with residency, OUT bytes; INP loads and one store per output tile. Among a
    compound move's candidates (the same MACs) it ranks them about as the timing model does (Spearman
    0.76-0.98 on the ResNet-18 layers of pynq_4x8 at 167 MHz where they pay)."""
    idx = np.asarray(indices, dtype=np.int64)
    if not len(idx):
        return np.zeros(0)
    feats = _raw_features(view, idx) if feats is None else feats  # `feats`: `idx`'s, computed already

    def col(name: str) -> np.ndarray:
        return 2.0 ** feats[:, _FEATURES.index(name)]

    p, hw = TimingParams(), view.space.hw
    nbytes = col("log2_inp_bytes") + col("log2_wgt_bytes_loaded") + col("log2_out_bytes")
    return nbytes / (hw.bus_bytes * p.dma_dram_efficiency) + (col("log2_inp_loads") + col("log2_n_tiles")) * p.dma_insn_latency


def compound_moves(view: SpaceView, centre: int) -> np.ndarray:
    """Per residency knob of `STATIONARY` the centre leaves at 0, the valid configs with the lowest
    `dma_estimate` (when at most `COMPOUND_SLACK` times the centre's) that set it with one of its loop
    orders and the tiles that go with it (the whole reduction in one tile): first (each knob) the one
    that keeps the centre's h/w/co splits, then the one of any split (stem of ResNet-18 on
    pynq_1x16_i8w8a32_14_13_15_16_200MHz: the far one alone, 9.15 ms against the centre's 9.47, took the
    best-first search away from the near one, 6.78, and its neighbours, 6.61); the GEMM
    kernel's fold and lift and `acc_resident` back to the template's, the `RESET_KNOBS` the
    centre's (or off, where the centre's are invalid there). One-knob moves cannot reach them: each knob
    alone is invalid (a stationary tile must hold the whole reduction, whose input tile then overflows
    the buffer) or changes nothing (the order without residency)."""
    names = list(getattr(view.space, "knob_names", ()))
    need = set(SHAPE_KNOBS) | {"vthread", "early_epilogue"}
    if not need <= set(names) or not hasattr(view.space, "hw"):
        return np.zeros(0, dtype=np.int64)
    j = {n: k for k, n in enumerate(names)}
    here = view.positions([centre])[0]
    dims = np.asarray(view.dims)
    whole = [p for p, c in enumerate(view.space.knobs[j["tile_ci"]].candidates)
             if isinstance(c, (tuple, list)) and c[0] == 1]
    knobs = [n for n in STATIONARY if here[j[n]] == 0]
    if not whole or not knobs:
        return np.zeros(0, dtype=np.int64)
    # every knob's candidates in one batch: a validity check costs ~3 ms of CPU however few rows it has
    parts = []
    for knob in knobs:
        grid = np.stack(np.meshgrid(np.asarray(STATIONARY[knob]), np.arange(dims[j["tile_h"]]), np.arange(dims[j["tile_w"]]),
                                    np.arange(dims[j["tile_co"]]), np.asarray(whole), indexing="ij"), -1).reshape(-1, 5)
        part = np.repeat(here[None, :], len(grid), axis=0)
        for c, n in enumerate(("order", "tile_h", "tile_w", "tile_co", "tile_ci")):
            part[:, j[n]] = grid[:, c]
        part[:, [j[n] for n in STATIONARY]] = 0
        part[:, j[knob]] = 1
        parts.append(part)
    rows = np.vstack(parts)
    rows[:, [j["uop_fold"], j["uop_lift"], j["acc_resident"]]] = 0
    which = np.repeat(np.arange(len(knobs)), [len(p) for p in parts])
    fit = _may_fit(view, rows, j)  # most tilings of the whole reduction overflow INP or ACC: not worth the mask
    rows, which = rows[fit], which[fit]
    idx = view.index(rows)
    ok = view.valid_mask(idx, exact=False)  # the staged mask (the costly edge rules left out): picks checked below
    reset = [j[n] for n in RESET_KNOBS if n in j]
    if not ok.all() and here[reset].any():  # the centre's threads and padding skip, or none
        bad = np.flatnonzero(~ok)
        rows[np.ix_(bad, reset)] = 0
        idx[bad] = view.index(rows[bad])
        ok[bad] = view.valid_mask(idx[bad], exact=False)
    idx, which = idx[ok], which[ok]
    if not len(idx):
        return np.zeros(0, dtype=np.int64)
    both = np.concatenate([[centre], idx])
    feats = _raw_features(view, both)
    est = dma_estimate(view, both, feats)
    base, est, feats = est[0], est[1:], feats[1:]
    # per knob, the centre's h/w/co tiles (the template stage chose them) first, then any tiling's lowest estimate
    tiles = [j["tile_h"], j["tile_w"], j["tile_co"]]
    same = (view.positions(idx)[:, tiles] == here[tiles]).all(axis=1)
    # a weight-stationary compound leaves a WGT row free: a residual add fused into the layer needs one for
    # its identity block, and without it the network plan scans every template schedule of the layer with its
    # epilogue (ResNet-18's downsample convs on pynq_4x8: ~0.7 CPU-s each, a trial's whole budget)
    room = (feats[:, _FEATURES.index("wgt_util")] < 1.0) | (which != knobs.index("wgt_stationary")
                                                           if "wgt_stationary" in knobs else True)
    live = (est <= base * COMPOUND_SLACK) & room
    for _ in range(4):  # the picks through the exact rules, together; one that fails them gives way to the next
        out: list[int] = []
        for near in (True, False):
            for m in range(len(knobs)):
                mine = np.flatnonzero((which == m) & (same | (not near)) & live)
                if len(mine):
                    out.append(int(mine[np.argmin(est[mine])]))  # the first of the lowest
        out = list(dict.fromkeys(out))  # each once
        exact = view.valid_mask(idx[out]) if out else np.zeros(0, dtype=bool)
        if exact.all():
            break
        live[np.asarray(out)[~exact]] = False
    out = [int(idx[k]) for k, good in zip(out, exact) if good]
    return np.asarray(out, dtype=np.int64)


def _may_fit(view: SpaceView, rows: np.ndarray, j: Mapping[str, int]) -> np.ndarray:
    """Per row of knob positions, False when its tile cannot fit the INP or ACC buffer even without a halo
    or a second thread (batch x reduction blocks x output rows x columns of one tile against the INP depth,
    batch x output blocks x rows x columns against the ACC depth): a necessary condition of the space's
    SRAM rules, in a few array operations instead of the validity mask's ~4 ms per ~1,000 rows."""
    hw = view.space.hw

    def inner(name: str) -> np.ndarray:
        cands = view.space.knobs[j[name]].candidates
        values = np.array([c[1] if isinstance(c, (tuple, list)) else 1 for c in cands], dtype=np.int64)
        return values[rows[:, j[name]]]

    b = inner("tile_b") if "tile_b" in j else 1
    pos = inner("tile_h") * inner("tile_w") * b
    return (inner("tile_ci") * pos <= hw.inp_depth) & (inner("tile_co") * pos <= hw.acc_depth)


def apply_compound(view: SpaceView, centre: int, compound: int) -> int:
    """`compound`'s `SHAPE_KNOBS` on `centre` (the kernel knobs the search has set since, kept), else with
    its `RESET_KNOBS` too, else `compound` itself: the first of them that is valid."""
    names = list(getattr(view.space, "knob_names", ()))
    shape = [k for k, n in enumerate(names) if n in SHAPE_KNOBS]
    threads = [k for k, n in enumerate(names) if n in RESET_KNOBS]
    pos = view.positions([centre, compound])
    if (pos[0] == pos[1])[[k for k in range(len(names)) if k not in shape]].all():
        return int(compound)  # the centre it was made from (or one that differs in its shape only)
    row = pos[0].copy()
    row[shape] = pos[1, shape]
    rows = np.stack([row, row])
    rows[1, threads] = pos[1, threads]
    idx = view.index(rows)
    ok = view.valid_mask(idx)
    return int(idx[ok][0]) if ok.any() else int(compound)


def transplants(view: SpaceView, centre: int, tilings: Sequence[int]) -> np.ndarray:
    """The valid configs with `centre`'s non-tile knobs on the tiles of each of `tilings` (indices
    of this space, in order), other than `centre` and the tilings themselves."""
    names = list(getattr(view.space, "knob_names", ()))
    tiles = [j for j, n in enumerate(names) if n in TILE_KNOBS]
    if not tiles or not len(tilings):
        return np.zeros(0, dtype=np.int64)
    pos = view.positions(list(tilings))
    rows = np.repeat(view.positions([centre]), len(pos), axis=0)
    rows[:, tiles] = pos[:, tiles]
    idx = view.index(rows)
    keep = (idx != centre) & ~np.isin(idx, np.asarray(tilings, dtype=np.int64))
    idx = idx[keep]
    idx = idx[np.sort(np.unique(idx, return_index=True)[1])]  # first occurrence, order kept
    return idx[view.valid_mask(idx)] if len(idx) else idx


def move_ranks(view: SpaceView, centre: int, neighbours: np.ndarray, order: Sequence[str] = MOVE_ORDER) -> np.ndarray:
    """Per neighbour, the rank of the knob it moves: its position in `order`, `len(order)` for a knob
    not listed (the tiles); `len(order) + 1` for a move that sets a knob of `order` the centre has set
    back to position 0 (alone, or as the coupled reset of a move of another knob)."""
    names = list(getattr(view.space, "knob_names", ()))
    rank = np.full(len(neighbours), len(order), dtype=np.int64)
    if not names or len(neighbours) == 0:
        return rank
    pos = view.positions(neighbours)
    moved = pos != view.positions([centre])[0][None, :]
    # a move ranks by the knobs it sets off position 0 (today's program); one that only resets knobs
    # to 0 (a coupled reset, `SpaceView.neighbours`, or undoing how the search got to the centre) last
    setting = moved & (pos != 0)
    for j, name in enumerate(names):
        if name in order:
            rank = np.where(setting[:, j], np.minimum(rank, order.index(name)), rank)
    # a move that resets a ranked knob the centre has set (a coupled reset: `uop_fold` or `uop_lift` drop
    # `pad_skip`; or the undo move) takes back what the search found: after every other move, tile moves too
    unsetting = moved & (pos == 0) & np.array([name in order for name in names])[None, :]
    return np.where(unsetting.any(axis=1), len(order) + 1, rank)


def flat_knobs(view: SpaceView, measured: Iterable[MeasureResult], order: Sequence[str] = MOVE_ORDER) -> set[str]:
    """The knobs of `order` whose moves did not pay on this layer: among the `measured` results, at
    least `FLAT_TRIES` pairs differ in that knob alone, one of them at the knob's position 0 (today's
    program), and in none is the other (the knob set) `FLAT_TOL` or more faster."""
    ok = [r for r in measured if r.ok and r.seconds]
    names = list(getattr(view.space, "knob_names", ()))
    if len(ok) < 2 or not names:
        return set()
    pos = view.positions([int(r.config.index) for r in ok])
    t = np.array([r.seconds for r in ok], dtype=float)
    i, j = np.triu_indices(len(ok), k=1)
    diff = pos[i] != pos[j]
    one = diff.sum(axis=1) == 1
    i, j, knob = i[one], j[one], diff[one].argmax(axis=1)
    pi, pj = pos[i, knob], pos[j, knob]
    off = (pi == 0) | (pj == 0)  # a pair of the knob unset and set
    t_unset, t_set = np.where(pi == 0, t[i], t[j]), np.where(pi == 0, t[j], t[i])
    pays = t_unset - t_set >= FLAT_TOL * t_set
    flat = set()
    for k in np.unique(knob[off]).tolist():
        mine = off & (knob == k)
        if names[k] in order and mine.sum() >= FLAT_TRIES and not pays[mine].any():
            flat.add(names[k])
    return flat


def _ranked(view: SpaceView, centre: int, neighbours: np.ndarray, rng: np.random.Generator, order: Sequence[str],
            tilings: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """(ids, their ranks) in the order to time them (`ranked_neighbours`)."""
    nb = np.asarray(neighbours, dtype=np.int64)
    shuffled = nb[rng.permutation(len(nb))]
    moves = transplants(view, centre, tilings)
    ids = np.concatenate([moves, shuffled[~np.isin(shuffled, moves)]])  # a transplant may be a tile move too
    rank = np.concatenate([np.full(len(moves), TRANSPLANT_RANK),
                           move_ranks(view, centre, ids[len(moves):], order).astype(float)])
    step = tile_steps(view, centre, ids)
    step[:len(moves)] = np.arange(len(moves))  # transplants keep the tilings' order
    keep = np.lexsort((step, rank))  # by rank, then (tile moves) the nearest split of each tile knob in turn
    return ids[keep], rank[keep]


def tile_steps(view: SpaceView, centre: int, ids: np.ndarray) -> np.ndarray:
    """Per move, 0 unless it moves one tile knob alone; then its place among the moves of that knob
    by how far the split's inner factor moves (|log2 ratio|; 0: the nearest), so that sorted by it
    each tile knob's nearest split comes before any knob's second nearest. The template stage chose
    the tiles: a move that keeps most of their shape is likelier to pay than a jump (ResNet-18 on
    pynq_4x8 at 167 MHz: the tile_ci split next to the template's, 5-20% per layer)."""
    names = list(getattr(view.space, "knob_names", ()))
    knobs = getattr(view.space, "knobs", ())
    out = np.zeros(len(ids))
    if not len(ids) or len(knobs) != len(names):
        return out
    pos, here = view.positions(ids), view.positions([centre])[0]
    moved = pos != here[None, :]
    for k, name in enumerate(names):
        if name not in TILE_KNOBS:
            continue
        mine = np.flatnonzero(moved[:, k] & (moved.sum(axis=1) == 1))
        if not len(mine):
            continue
        inner = np.array([c[1] if isinstance(c, (tuple, list)) else 1 for c in knobs[k].candidates], dtype=float)
        dist = np.abs(np.log2(inner[pos[mine, k]] / inner[here[k]]))
        out[mine] = np.argsort(np.argsort(dist, kind="stable"), kind="stable")  # the place by distance
    return out


def ranked_neighbours(view: SpaceView, centre: int, neighbours: np.ndarray, rng: np.random.Generator,
                      order: Sequence[str] = MOVE_ORDER, tilings: Sequence[int] = ()) -> list[int]:
    """`neighbours` of `centre` and its `transplants` onto `tilings` in the order to time them
    (first first): by `move_ranks` (transplants at `TRANSPLANT_RANK`, in the tilings' order); the tile
    moves by `tile_steps`; other ties in a seeded random order."""
    return [int(i) for i in _ranked(view, centre, neighbours, rng, order, tilings)[0]]


class RankedFrontier:
    """A centre's neighbours not timed yet, `pop()`ped in `ranked_neighbours`' order, re-ranked as the
    search measures: a move that sets a knob whose moves did not pay in `measured` (`flat_knobs`; the search's
    results so far, a live mapping) goes after the tile moves. A sweep trial's 16 measurements per
    layer would otherwise go to a knob's every value on a layer where none of them matters.

    The moves that cost a validity check of their own (`transplants`, at `TRANSPLANT_RANK`; `compounds`, at
    `COMPOUND_RANK`: ids, or a callable that makes them) are made when the frontier reaches their rank: most
    frontiers are left before (an improving kernel-knob move makes a new centre), and each check costs ~3 ms
    of CPU, ~0.2 s per ResNet-18 trial."""

    def __init__(self, view: SpaceView, centre: int, neighbours: np.ndarray, rng: np.random.Generator, *,
                 measured: Mapping[int, MeasureResult], order: Sequence[str] = MOVE_ORDER,
                 tilings: Sequence[int] = (), compounds: Sequence[int] | Callable[[], Sequence[int]] = ()) -> None:
        self.view, self.order, self.measured = view, tuple(order), measured
        self.ids, self.rank = _ranked(view, centre, neighbours, rng, self.order, ())
        self._names = list(getattr(view.space, "knob_names", ()))
        self._here = view.positions([centre])[0]
        self._sets = self._setting(self.ids)
        self._left = np.ones(len(self.ids), dtype=bool)
        self._seen = -1  # len(measured) the ranks were last learned at
        self._eff = self.rank
        blocks: list[tuple[float, Callable[[], Sequence[int]]]] = [
            (TRANSPLANT_RANK, lambda: transplants(view, centre, tilings) if len(tilings) else ())]
        if callable(compounds) or len(compounds):
            blocks.append((COMPOUND_RANK, compounds if callable(compounds) else lambda: compounds))
        self._blocks = sorted(blocks, key=lambda b: b[0])

    def _setting(self, ids: np.ndarray) -> dict[str, np.ndarray]:
        """Per ranked knob, which of `ids` set it (off the centre's value and off position 0)."""
        pos = self.view.positions(ids) if len(ids) else np.zeros((0, len(self._names)), dtype=np.int64)
        return {n: (pos[:, k] != self._here[k]) & (pos[:, k] != 0) for k, n in enumerate(self._names) if n in self.order}

    def _expand(self) -> None:
        """Make the first pending block; its moves go after the frontier's in their order (a move the
        frontier holds already moves there; one it gave out is dropped)."""
        rank, make = self._blocks.pop(0)
        new = np.asarray(make(), dtype=np.int64).reshape(-1)
        if not len(new):
            return
        new = new[np.sort(np.unique(new, return_index=True)[1])]
        held = np.isin(self.ids, new)
        new = new[~np.isin(new, self.ids[held & ~self._left])]
        self._left &= ~held
        self.ids = np.concatenate([self.ids, new])
        self.rank = np.concatenate([self.rank, np.full(len(new), rank)])
        self._left = np.concatenate([self._left, np.ones(len(new), dtype=bool)])
        more = self._setting(new)
        self._sets = {n: np.concatenate([v, more[n]]) for n, v in self._sets.items()}
        self._seen = -1

    def __len__(self) -> int:
        while not self._left.any() and self._blocks:
            self._expand()
        return int(self._left.sum())

    def pop(self) -> int:
        """The next neighbour to time (IndexError when none is left)."""
        while True:
            if not len(self):
                raise IndexError("pop from an empty frontier")
            if len(self.measured) != self._seen:  # learn again after each measurement
                self._seen = len(self.measured)
                flat = flat_knobs(self.view, self.measured.values(), self.order)
                late = np.zeros(len(self.ids), dtype=bool)
                for name in flat & set(self._sets):
                    late |= self._sets[name]
                self._eff = np.where(late & (self.rank < len(self.order)), len(self.order) + 0.5, self.rank)
            if self._blocks and self._blocks[0][0] < float(np.min(self._eff[self._left])):
                self._expand()  # its rank is reached
                continue
            k = int(np.flatnonzero(self._left)[np.argmin(self._eff[self._left])])  # first of the lowest rank
            self._left[k] = False
            return int(self.ids[k])


__all__ = ["COMPOUND_RANK", "COMPOUND_SLACK", "FLAT_TOL", "FLAT_TRIES", "MOVE_ORDER", "RESET_KNOBS", "SHAPE_KNOBS", "STATIONARY", "TRANSPLANTS", "TRANSPLANT_RANK", "RankedFrontier", "apply_compound", "compound_moves", "dma_estimate", "flat_knobs",
           "move_ranks", "ranked_neighbours", "tile_steps", "transplants"]
