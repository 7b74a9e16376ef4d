"""Growing one cluster a super-node at a time under OpenVINO HETERO's global condition, without any
n×n closure (strategies ``mxnet`` and ``hetero``).

The condition: no rejected super-node may lie on a path between two members of the growing set.
:class:`GrowthTracker` checks it after every step with early-exit searches, and rolls back last
in, first out; :class:`GrowthState` keeps the size, never-together and constant-byte bookkeeping
of the same growth. Both work on a :class:`~clusterkit.engines.super_nodes.SuperNodeGraph`.

Pruning, computed once per graph and never per pair: a path ``u ~> v`` only passes super-nodes that
lie between ``u`` and ``v`` in *every* topological numbering (:attr:`SuperNodeGraph.orders` keeps
three: rank, depth and height, so that long edges and a scrambled rank do not widen the window of a
local growth), and only if ``v``'s GRAIL interval lies inside ``u``'s in each labelling
(:attr:`SuperNodeGraph.intervals`). Proof the other way round comes from landmarks
(:attr:`SuperNodeGraph.landmarks`): ``u`` reaches a landmark that reaches ``v``, one AND of two
integer bitsets, so most positive answers need no search.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from clusterkit._deprecated import module_getattr, renamed_attribute
from clusterkit.engines.super_nodes import SuperNodeGraph


@dataclass
class GrowingCluster:
    """A cluster under construction (on an accelerator): its device index and super-nodes.
    (``Piece`` is its deprecated old name.)"""

    device: int
    super_nodes: list[int]
    tag: dict = field(default_factory=dict)

    units = renamed_attribute("super_nodes")  # the old name, deprecated


_BIG = 1 << 62
_SCAN_MEMBERS = 128   # up to this many members, test each one with GRAIL instead of searching
_SCAN_REJECTED = 512  # up to this many rejected super-nodes, test each one when a member joins
_EXPAND, _SKIP, _STOP = 0, 1, 2  # what a window search does at a super-node


class GrowthTracker:
    """OpenVINO HETERO's global condition for one growing set ``S`` with a rejected list ``R``:
    no rejected super-node may lie on a path between two members.

    Checked at every step by early-exit searches, never by labelling whole regions:

    - adding ``x`` can only create paths through ``x``: is there a rejected ``r`` with
      ``S ~> r ~> x`` or ``x ~> r ~> S``? With few rejected super-nodes each is tested (order and
      GRAIL filters, then a depth-first search pruned toward its single target); otherwise one
      search from ``x`` looks for a rejected super-node, stopping at members (a rejected super-node
      behind a member would already have failed the condition);
    - rejecting ``r`` can only put ``r`` itself between two members;
    - rolling back is last-in-first-out, and only the super-node whose rejection failed the
      condition and the super-nodes rolled back since can then lie between members; one whose two
      witness members both live proves the condition still fails, and the others are searched again
      only once none does. After a number of single steps (``settle``'s ``batch_after``) the
      stopping point is computed at once.

    "Which member reaches ``z``" is cached per growth: a found member stays valid while it
    lives, a miss stays valid for the members it saw, so only later members are tried (the
    first member a scan finds, once rolled back, leaves the members before it misses). Every
    search stays inside the window of ``S`` in the three orders of :attr:`SuperNodeGraph.orders`.
    ``blocked`` super-nodes (``begin``) count as rejected from the start (MXNet's eager variant).
    """

    def __init__(self, contracted: SuperNodeGraph):
        n = contracted.n
        self.contracted = contracted
        self.succ, self.pred = contracted.succ, contracted.pred
        # the three topological numberings of SuperNodeGraph.orders
        self.rank_order, self.depth_order, self.height_order = contracted.orders
        # per super-node its three numberings and itself
        self._orders = list(zip(self.rank_order, self.depth_order, self.height_order, range(n)))
        # sources and sinks: never on a path between two super-nodes, so never between members
        self._end = [not s or not p for s, p in zip(self.succ, self.pred)]
        self._grail = [lab for pair in contracted.intervals for lab in pair]
        # SuperNodeGraph.landmarks: a landmark's own bit, the landmarks reaching / reached from
        self.landmark_bit, self.landmarks_in, self.landmarks_out = contracted.landmarks
        self._marks = [u for u, b in enumerate(self.landmark_bit) if b]
        # member_stamp[u] == growth_id: u is a member of this growth; rejected_stamp likewise
        self.member_stamp = [0] * n
        self.member_position = [0] * n  # a member's position in ``members`` (while it lives)
        self.rejected_stamp = [0] * n
        self.growth_id = 0  # this growth's number (begin() adds one: forgets the last in O(1))
        self._seen = [0] * n    # visit stamps of _phase_search
        self._n = n
        self._known: dict[int, bool] = {}   # searched pairs a * n + b: does a reach b
        self._stamp = 0
        self.begin()

    def begin(self, blocked: list[bool] | None = None, blocked_marks: int | None = None
              ) -> None:
        """Start a new growth (forget the previous one in O(1)). ``blocked`` marks super-nodes that
        count as rejected from the start (they can never join); ``blocked_marks``, when the
        caller keeps it, is the OR of :attr:`landmark_bit` over them (see :meth:`marks_of`)."""
        self.growth_id += 1
        self.blocked = blocked
        self.members: list[int] = []
        self.rejected: list[int] = []
        # (orders..., super-node) per rejected super-node that is neither a source nor a sink
        self._rejected_orders: list[tuple[int, int, int, int]] = []
        self.rolled: list[int] = []
        self.hi = (-1, -1, -1)
        self.lo = (_BIG, _BIG, _BIG)
        # per member, the window and landmark ORs before it joined (restored by _pop)
        self.history: list[tuple[tuple[int, int, int], tuple[int, int, int], int, int]] = []
        self.suspects: dict[int, tuple[int, int] | None] = {}
        self._proof = -1    # the suspect whose witnesses last proved the condition failing
        self._cache: dict[int, tuple[int, int, int | None]] = {}
        self.violated = False
        # landmarks reaching / reached from some member (prefix ORs, undone by _pop) and the
        # rejected or blocked landmarks: s_in & s_out & bad proves the condition fails
        self.marks_in = self.marks_out = 0
        if blocked is None:
            self.bad_marks = 0
        else:
            self.bad_marks = self.marks_of(blocked) if blocked_marks is None else blocked_marks

    def marks_of(self, blocked: list[bool]) -> int:
        """The landmark bits of the ``blocked`` super-nodes (OR of :attr:`landmark_bit`)."""
        # bound to locals for speed: the loop below reads them often
        own = self.landmark_bit
        return sum(own[u] for u in self._marks if blocked[u])

    @property
    def total(self) -> int:
        """1 while the condition fails, else 0."""
        return 1 if self.violated else 0

    def is_member(self, x: int) -> bool:
        return self.member_stamp[x] == self.growth_id

    def is_rejected(self, x: int) -> bool:
        return self.rejected_stamp[x] == self.growth_id

    # ------------------------------------------------------------------ steps
    def add(self, x: int, check: bool = True) -> None:
        """Make ``x`` a member and check the condition (``check=False``: known to hold, as when
        a logged growth is replayed)."""
        members = self.members
        self.member_stamp[x] = self.growth_id
        self.member_position[x] = len(members)
        members.append(x)
        hi, lo = self.hi, self.lo      # never changed in place: the history shares them
        # bound to locals for speed: the loop below reads them often
        s_in, s_out = self.marks_in, self.marks_out
        self.history.append((hi, lo, s_in, s_out))
        a, b, c, _ = self._orders[x]
        h0, h1, h2 = hi
        if a > h0 or b > h1 or c > h2:
            self.hi = (a if a > h0 else h0, b if b > h1 else h1, c if c > h2 else h2)
        l0, l1, l2 = lo
        if a < l0 or b < l1 or c < l2:
            self.lo = (a if a < l0 else l0, b if b < l1 else l1, c if c < l2 else l2)
        self.marks_in = s_in = s_in | self.landmarks_in[x]
        self.marks_out = s_out = s_out | self.landmarks_out[x]
        if check and len(members) > 1 and (self.rejected or self.blocked is not None) \
                and self._through(x):
            self.violated = True
            self.suspects = {}

    def reject(self, x: int, check: bool = True) -> None:
        """Put ``x`` on the rejected list and check the condition (unless ``check`` is False:
        known to hold)."""
        self.rejected_stamp[x] = self.growth_id
        self.rejected.append(x)
        self.bad_marks |= self.landmark_bit[x]
        if self._end[x]:
            return
        self._rejected_orders.append(self._orders[x])
        if not check:
            return
        w = None if self.outside(x) else self._witness(x)
        if w is not None:
            self.suspects[x] = w
            self._proof = x
            self.violated = True

    def settle(self, batch_after: int = 8) -> list[int]:
        """Roll back (last in, first out) until the condition holds; return the super-nodes removed,
        latest first. After ``batch_after`` single steps the stopping point is computed at
        once from earliest-member labels (see :meth:`_batch_rollback`)."""
        removed: list[int] = []
        # bound to locals for speed: the loop below reads them often
        members, mpos = self.members, self.member_position
        while self.violated:
            if len(removed) >= batch_after and len(members) > 2 * batch_after:
                removed.extend(self._batch_rollback())
                break
            # members that joined after both witnesses of the proof: rolling one back leaves
            # the proof standing (what rollback() would find), so pop them without a check
            w = self.suspects.get(self._proof)
            if w is not None:
                last = max(mpos[w[0]], mpos[w[1]])
                k = len(members) - 1 - last
                if len(members) > 2 * batch_after:
                    k = min(k, batch_after - len(removed))
                if k > 0:
                    removed.extend(self._pop_many(k))
                if len(members) - 1 > last:
                    continue
            removed.append(self.rollback())
        return removed

    def _pop_many(self, k: int) -> list[int]:
        """Roll back the latest ``k`` members without checks, as ``k`` calls of :meth:`_pop`
        would, each becoming a suspect without witnesses; return them, latest first."""
        # bound to locals for speed: the loop below reads them often
        members, mem = self.members, self.member_stamp
        rej, gid = self.rejected_stamp, self.growth_id
        xs = members[-1:-k - 1:-1]
        del members[-k:]
        own, rord, suspects, end = self.landmark_bit, self._orders, self.suspects, self._end
        bad = self.bad_marks
        for x in xs:
            mem[x] = 0
            rej[x] = gid
            bad |= own[x]
            if not end[x]:
                suspects[x] = None
        self.bad_marks = bad
        self.hi, self.lo, self.marks_in, self.marks_out = self.history[-k]
        del self.history[-k:]
        self.rolled.extend(xs)
        self.rejected.extend(xs)
        self._rejected_orders.extend([rord[x] for x in xs if not end[x]])
        return xs

    def replay(self, steps: list[int], removed: dict[int, int], count: int) -> list[int]:
        """Apply the first ``count`` steps of a logged growth whose outcomes are known, as
        ``add``/``reject``/``undo`` without checks would: ``steps[j]`` a super-node made a member
        (``~super-node``: rejected), then ``removed[j]`` (when present) members rolled back.
        Returns the super-nodes rolled back, in order."""
        # bound to locals for speed: the loop below reads them often
        gid, mem = self.growth_id, self.member_stamp
        mpos, rej = self.member_position, self.rejected_stamp
        members, history = self.members, self.history
        rejected, rords, rolled = self.rejected, self._rejected_orders, self.rolled
        rord, own, end = self._orders, self.landmark_bit, self._end
        lin, lout = self.landmarks_in, self.landmarks_out
        hi, lo, bad = self.hi, self.lo, self.bad_marks
        s_in, s_out = self.marks_in, self.marks_out
        out: list[int] = []
        for j in range(count):
            x = steps[j]
            if x >= 0:
                mem[x] = gid
                mpos[x] = len(members)
                members.append(x)
                history.append((hi, lo, s_in, s_out))
                a, b, c, _ = rord[x]
                h0, h1, h2 = hi
                if a > h0 or b > h1 or c > h2:
                    hi = (a if a > h0 else h0, b if b > h1 else h1, c if c > h2 else h2)
                l0, l1, l2 = lo
                if a < l0 or b < l1 or c < l2:
                    lo = (a if a < l0 else l0, b if b < l1 else l1, c if c < l2 else l2)
                s_in |= lin[x]
                s_out |= lout[x]
            else:
                x = ~x
                rej[x] = gid
                rejected.append(x)
                if not end[x]:
                    rords.append(rord[x])
                bad |= own[x]
            k = removed.get(j)
            while k:
                k -= 1
                y = members.pop()
                mem[y] = 0
                hi, lo, s_in, s_out = history.pop()
                rolled.append(y)
                rej[y] = gid
                rejected.append(y)
                if not end[y]:
                    rords.append(rord[y])
                bad |= own[y]
                out.append(y)
        self.hi, self.lo, self.marks_in, self.marks_out, self.bad_marks = hi, lo, s_in, s_out, bad
        return out

    def undo(self) -> int:
        """Roll back the latest member, as :meth:`rollback` does, without checking again (the
        caller knows the outcome); return it."""
        return self._pop()

    def _pop(self) -> int:
        x = self.members.pop()
        self.member_stamp[x] = 0
        self.hi, self.lo, self.marks_in, self.marks_out = self.history.pop()
        self.rolled.append(x)
        self.rejected_stamp[x] = self.growth_id
        self.rejected.append(x)
        if not self._end[x]:
            self._rejected_orders.append(self._orders[x])
        self.bad_marks |= self.landmark_bit[x]
        return x

    def _batch_rollback(self) -> list[int]:
        """Where the step-by-step rollback would stop, from one labelling of the window: with
        ``d[z]``/``a[z]`` the earliest member (by position) reaching / reached from ``z``, a
        super-node lies between the first ``k`` members iff ``max(d, a) < k``; the candidates are
        the current suspects and every member rolled back on the way."""
        members = self.members
        pos = {m: i for i, m in enumerate(members)}
        down = self._earliest(True, pos)
        up = self._earliest(False, pos)
        big = len(members) + 1

        def key(z: int) -> int:
            return max(down.get(z, big), up.get(z, big))

        worst = min((key(z) for z in self.suspects), default=big)
        k = len(members)
        while k > 1:
            worst = min(worst, key(members[k - 1]))
            k -= 1
            if worst >= k:
                break
        removed = [self._pop() for _ in range(len(members) - k)]
        self.suspects = {}
        self.violated = False
        return removed

    def _earliest(self, forward: bool, pos: dict[int, int]) -> dict[int, int]:
        """Per super-node of the window, the earliest member (position) reaching it (``forward``)
        or reached from it, through paths of length >= 1."""
        adj = self.succ if forward else self.pred
        # bound to locals for speed: the loop below reads them often
        o0, o1, o2 = self.rank_order, self.depth_order, self.height_order
        h0, h1, h2 = self.hi
        l0, l1, l2 = self.lo
        label: dict[int, int] = {}
        for i, m in enumerate(self.members):
            stack = list(adj[m])
            while stack:
                y = stack.pop()
                if y in label:
                    continue
                if forward:
                    if o0[y] > h0 or o1[y] > h1 or o2[y] > h2:
                        continue
                elif o0[y] < l0 or o1[y] < l1 or o2[y] < l2:
                    continue
                label[y] = i
                stack.extend(adj[y])
        return label

    def rollback(self) -> int:
        """Remove the latest member, put it on the rejected list, check again; return it.
        A suspect whose two witnesses live proves the condition still fails: the others
        are then searched again only once none does (at most one is found per step)."""
        x = self._pop()
        suspects = self.suspects
        if not self._end[x]:
            suspects[x] = None
        # bound to locals for speed: the loop below reads them often
        mem, gid = self.member_stamp, self.growth_id  # a member rolled back never joins again
        w = suspects.get(self._proof)   # usually still alive: one test
        if w is not None and mem[w[0]] == gid and mem[w[1]] == gid:
            self.violated = True
            return x
        for z, w in suspects.items():
            if w is not None and mem[w[0]] == gid and mem[w[1]] == gid:
                self._proof = z
                self.violated = True
                return x
        # bound to locals for speed: the loop below reads them often
        o0, o1, o2 = self.rank_order, self.depth_order, self.height_order
        h0, h1, h2 = self.hi
        l0, l1, l2 = self.lo
        while suspects:     # oldest first; a suspect without witnesses leaves
            z = next(iter(suspects))
            a, b, c = o0[z], o1[z], o2[z]   # outside() inlined: outside, no witnesses
            if (a > h0 or b > h1 or c > h2) != ((a < l0 and a <= h0) or (b < l1 and b <= h1)
                                                or (c < l2 and c <= h2)):
                del suspects[z]
                continue
            w = self._witness(z)
            if w is not None:
                suspects[z] = w
                self._proof = z
                self.violated = True
                return x
            del suspects[z]
        self.violated = False
        return x

    # ------------------------------------------------------------------ window and filters
    def outside(self, x: int) -> int:
        """+1 when ``x`` lies after the window in some order (it reaches no member), -1 when
        before it (no member reaches it), 0 when inside (or both)."""
        a, b, c = self.rank_order[x], self.depth_order[x], self.height_order[x]
        h0, h1, h2 = self.hi
        l0, l1, l2 = self.lo
        after = a > h0 or b > h1 or c > h2
        before = (a < l0 and a <= h0) or (b < l1 and b <= h1) or (c < l2 and c <= h2)
        if after == before:
            return 0
        return 1 if after else -1

    # ------------------------------------------------------------------ searches
    def _reaches(self, a: int, b: int) -> bool:
        """``a ~> b`` (``a != b``) for a pair its callers have filtered (``a`` before ``b`` in
        every order, ``b``'s GRAIL intervals inside ``a``'s): landmarks, then a depth-first
        search pruned toward ``b``.
        Search answers are facts of the graph, kept for the tracker's lifetime (growths from
        nearby roots, and regrowths, ask the same pairs again)."""
        if self.landmarks_out[a] & self.landmarks_in[b]:
            return True
        key = a * self._n + b
        known = self._known.get(key)
        if known is not None:
            return known
        succ = self.succ
        # bound to locals for speed: the loop below reads them often
        o0, o1, o2 = self.rank_order, self.depth_order, self.height_order
        g0, g1, g2, g3, g4, g5 = self._grail
        b0, b1, b2 = o0[b], o1[b], o2[b]
        c0, c1, c2, c3, c4, c5 = g0[b], g1[b], g2[b], g3[b], g4[b], g5[b]
        seen = {a}
        stack = [a]
        found = False
        while stack and not found:
            for w in succ[stack.pop()]:
                if w == b:
                    found = True
                    break
                if w not in seen and o0[w] < b0 and g0[w] <= c0 and c1 <= g1[w] \
                        and g2[w] <= c2 and c3 <= g3[w] and g4[w] <= c4 and c5 <= g5[w] \
                        and o1[w] < b1 and o2[w] < b2:
                    seen.add(w)
                    stack.append(w)
        self._known[key] = found
        return found

    def _find_member(self, z: int, forward: bool) -> int | None:
        """Some member reached from ``z`` (``forward``) or reaching ``z``. Answers are
        cached per growth: a found member stays valid while it lives; a miss stays valid for
        the members it saw (rollback is last-in-first-out), so only later members are tried."""
        adj = self.succ if forward else self.pred
        # bound to locals for speed: the loop below reads them often
        mem, gid = self.member_stamp, self.growth_id
        for w in adj[z]:
            if mem[w] == gid:
                return w
        members = self.members
        key = z if forward else -1 - z
        hit = self._cache.get(key)
        first = 0
        if hit is not None:
            k, uk, found = hit
            if found is not None and mem[found] == gid:
                return found
            # a miss, or the first member found by a scan, now rolled back: the members
            # before it (still alive when the member before it is the same) were misses
            if k <= len(members) and (k == 0 or members[k - 1] == uk):
                first = k
        if first or len(members) <= _SCAN_MEMBERS:
            reaches = self._reaches
            # bound to locals for speed: the loop below reads them often
            o0, o1, o2 = self.rank_order, self.depth_order, self.height_order
            g0, g1, g2, g3, g4, g5 = self._grail
            z0, z1, z2 = o0[z], o1[z], o2[z]
            y0, y1, y2, y3, y4, y5 = g0[z], g1[z], g2[z], g3[z], g4[z], g5[z]
            found = None
            # the most selective filters first (depth forward, height backward)
            if forward:             # z ~> m possible: z before m, m's intervals inside z's
                for m in (members[first:] if first else members):
                    if z1 < o1[m] and y0 <= g0[m] and g1[m] <= y1 and y2 <= g2[m] \
                            and g3[m] <= y3 and y4 <= g4[m] and g5[m] <= y5 \
                            and z0 < o0[m] and z2 < o2[m] and reaches(z, m):
                        found = m
                        break
            else:
                for m in (members[first:] if first else members):
                    if o2[m] < z2 and o0[m] < z0 and g0[m] <= y0 and y1 <= g1[m] \
                            and g2[m] <= y2 and y3 <= g3[m] and g4[m] <= y4 and y5 <= g5[m] \
                            and o1[m] < z1 and reaches(m, z):
                        found = m
                        break
            # a found member is the first one: the members before it are misses
            k = len(members) if found is None else members.index(found, first)
            self._cache[key] = (k, members[k - 1] if k else -1, found)
            return found
        y = self._window_search(z, forward, lambda y: _STOP if mem[y] == gid else _EXPAND)
        if y is not None:
            self._cache[key] = (0, -1, y)
            return y
        k = len(members)
        self._cache[key] = (k, members[k - 1] if k else -1, None)
        return None

    def _witness(self, z: int) -> tuple[int, int] | None:
        """Two members with ``a ~> z ~> b``, or None, for a ``z`` inside the window (its
        callers test :meth:`outside` first). A member rolled back never joins again: the pair
        proves the condition failing while both are members."""
        a = self._find_member(z, False)
        if a is None:
            return None
        b = self._find_member(z, True)
        if b is None:
            return None
        return a, b

    def _through(self, x: int) -> bool:
        """Does a new member ``x`` put a rejected super-node between members (``S ~> r ~> x`` or
        ``x ~> r ~> S``)?"""
        # bound to locals for speed: the loop below reads them often
        mem, gid = self.member_stamp, self.growth_id
        pred, succ = self.pred[x], self.succ[x]
        back = fwd = True
        if self.violated:   # (never while a caller settles after each step)
            if self.marks_in & self.marks_out & self.bad_marks:
                return True
        else:   # the condition held: with a member predecessor p, x ~> r ~> S would make
            # p ~> r ~> S fail it already; the same for a member successor and S ~> r ~> x
            for w in pred:
                if mem[w] == gid:
                    fwd = False
                    break
            for w in succ:
                if mem[w] == gid:
                    back = False
                    break
        # r ~> x enters x from a predecessor; a member one would put r between members already
        # (or be r): with only member predecessors no S ~> r ~> x is new (same for successors)
        if back:
            for w in pred:
                if mem[w] != gid:
                    break
            else:
                back = False
        if fwd:
            for w in succ:
                if mem[w] != gid:
                    break
            else:
                fwd = False
        if not (back or fwd):
            return False
        if self.marks_in & self.marks_out & self.bad_marks:
            return True     # landmarks prove a rejected super-node between members
        # an r with S ~> r ~> x lies strictly between the window's low end (with x) and x in
        # every order: none when x is lowest in one (the same for x ~> r ~> S)
        x0, x1, x2 = self.rank_order[x], self.depth_order[x], self.height_order[x]
        if back:
            l0, l1, l2 = self.lo
            back = x0 - l0 > 1 and x1 - l1 > 1 and x2 - l2 > 1
        if fwd:
            h0, h1, h2 = self.hi
            fwd = h0 - x0 > 1 and h1 - x1 > 1 and h2 - x2 > 1
        if not (back or fwd):
            return False
        return self._neighbour_witness(x, back, fwd)

    def _neighbour_witness(self, x: int, back: bool, fwd: bool) -> bool:
        """:meth:`_through` past its quick answers: the commonest witness first (a rejected
        neighbour of ``x`` next to a member), then a scan or the phase search."""
        mem, gid, rej = self.member_stamp, self.growth_id, self.rejected_stamp
        pred, succ = self.pred[x], self.succ[x]
        if back:
            for r in pred:
                if rej[r] == gid:
                    for w in self.pred[r]:
                        if mem[w] == gid:
                            return True
        if fwd:
            for r in succ:
                if rej[r] == gid:
                    for w in self.succ[r]:
                        if mem[w] == gid:
                            return True
        if self.blocked is None and len(self.rejected) <= _SCAN_REJECTED:
            return self._scan(x, back, fwd)
        return self._phase_search(x, back, fwd)

    def _scan(self, x: int, back: bool, fwd: bool) -> bool:
        """:meth:`_through` testing each rejected super-node: the order and GRAIL filters (the most
        selective first, one direction at a time), then :meth:`_via`."""
        # bound to locals for speed: the loop below reads them often
        mem, gid = self.member_stamp, self.growth_id
        x0, x1, x2 = self.rank_order[x], self.depth_order[x], self.height_order[x]
        l0, l1, l2 = self.lo
        h0, h1, h2 = self.hi
        g0, g1, g2, g3, g4, g5 = self._grail
        y0, y1, y2, y3, y4, y5 = g0[x], g1[x], g2[x], g3[x], g4[x], g5[x]
        if back:    # may r ~> x, with a member before r?
            for r0, r1, r2, r in self._rejected_orders:
                if l2 < r2 < x2 and l0 < r0 < x0 and l1 < r1 < x1 \
                        and mem[r] != gid and g0[r] <= y0 and y1 <= g1[r] and g2[r] <= y2 \
                        and y3 <= g3[r] and g4[r] <= y4 and y5 <= g5[r] and self._via(r, x, False):
                    return True
        if fwd:     # may x ~> r, with a member after r?
            for r0, r1, r2, r in self._rejected_orders:
                if x1 < r1 < h1 and x0 < r0 < h0 and x2 < r2 < h2 \
                        and mem[r] != gid and y0 <= g0[r] and g1[r] <= y1 and y2 <= g2[r] \
                        and g3[r] <= y3 and y4 <= g4[r] and g5[r] <= y5 and self._via(r, x, True):
                    return True
        return False

    def _via(self, r: int, x: int, forward: bool) -> bool:
        """For a rejected ``r`` that the filters let through: ``S ~> r ~> x`` (``x ~> r ~> S``
        when ``forward``)? Landmarks, then a member on the far side and a search."""
        # bound to locals for speed: the loop below reads them often
        lin, lout = self.landmarks_in, self.landmarks_out
        if forward:
            if lout[x] & lin[r] and lout[r] & self.marks_in:
                return True     # landmarks prove x ~> r ~> S
            return self._find_member(r, True) is not None and self._reaches(x, r)
        if self.marks_out & lin[r] and lout[r] & lin[x]:
            return True         # landmarks prove S ~> r ~> x
        return self._find_member(r, False) is not None and self._reaches(r, x)

    def _phase_search(self, x: int, back: bool, fwd: bool) -> bool:
        """Is there a rejected (or blocked) super-node ``r`` with ``S ~> r ~> x`` (searched when
        ``back``) or ``x ~> r ~> S`` (when ``fwd``)? Searches from ``x`` inside the window,
        stopping at members (the visit of :meth:`_window_search` inlined, one setup for both
        directions: this search runs on every join)."""
        # bound to locals for speed: the loop below reads them often
        mem, rej = self.member_stamp, self.rejected_stamp
        gid, blocked = self.growth_id, self.blocked
        o0, o1, o2 = self.rank_order, self.depth_order, self.height_order
        find = self._find_member
        seen = self._seen
        if back:
            pred = self.pred
            c0, c1, c2 = self.lo
            self._stamp = stamp = self._stamp + 1
            seen[x] = stamp
            stack = [w for w in pred[x] if mem[w] != gid]
            while stack:
                y = stack.pop()
                if seen[y] == stamp:
                    continue
                seen[y] = stamp
                if o0[y] < c0 or o1[y] < c1 or o2[y] < c2 or mem[y] == gid:
                    continue
                if rej[y] == gid or (blocked is not None and blocked[y]):
                    if find(y, False) is not None:
                        return True
                    continue
                stack.extend(pred[y])
        if fwd:
            succ = self.succ
            c0, c1, c2 = self.hi
            self._stamp = stamp = self._stamp + 1
            seen[x] = stamp
            stack = [w for w in succ[x] if mem[w] != gid]
            while stack:
                y = stack.pop()
                if seen[y] == stamp:
                    continue
                seen[y] = stamp
                if o0[y] > c0 or o1[y] > c1 or o2[y] > c2 or mem[y] == gid:
                    continue
                if rej[y] == gid or (blocked is not None and blocked[y]):
                    if find(y, True) is not None:
                        return True
                    continue
                stack.extend(succ[y])
        return False

    def _window_search(self, x: int, forward: bool, visit: Callable[[int], int]) -> int | None:
        """Depth-first from ``x`` along successors (``forward``) or predecessors, inside the
        members' window in the three orders; ``visit(y)`` says whether to expand ``y``, skip it
        or stop there. Returns the super-node it stopped at, or ``None``."""
        adj = self.succ if forward else self.pred
        # bound to locals for speed: the loop below reads them often
        o0, o1, o2 = self.rank_order, self.depth_order, self.height_order
        h0, h1, h2 = self.hi
        l0, l1, l2 = self.lo
        seen = {x}
        stack = list(adj[x])
        while stack:
            y = stack.pop()
            if y in seen:
                continue
            seen.add(y)
            if forward:
                if o0[y] > h0 or o1[y] > h1 or o2[y] > h2:
                    continue
            elif o0[y] < l0 or o1[y] < l1 or o2[y] < l2:
                continue
            step = visit(y)
            if step == _STOP:
                return y
            if step == _EXPAND:
                stack.extend(adj[y])
        return None


class GrowthState:
    """Size, never-together and constant-byte bookkeeping of one growth on device ``d``
    (undoable), and :meth:`fits`: may super-node ``v`` join the tracker's current members?"""

    def __init__(self, contracted: SuperNodeGraph, d: int, max_nodes: int | None,
                 max_bytes: int | None):
        self.contracted = contracted
        self.d = d
        self.ok = contracted.ok[d]
        self.max_nodes = max_nodes
        self.max_bytes = max_bytes
        self.size = 0
        self.forbid: dict[int, int] = {}
        self.tcount: dict[int, int] = {}
        self.bytes = 0

    def fits(self, v: int, T: GrowthTracker) -> bool:
        contracted = self.contracted
        if self.max_nodes is not None and self.size + contracted.size[v] > self.max_nodes:
            return False
        if self.forbid.get(v):
            return False
        # bound to locals for speed: the loop below reads them often
        gid, mem, ok = T.growth_id, T.member_stamp, self.ok
        for w, e in zip(contracted.succ[v], contracted.succ_e[v]):
            if mem[w] == gid and not ok[e]:
                return False
        for w, e in zip(contracted.pred[v], contracted.pred_e[v]):
            if mem[w] == gid and not ok[e]:
                return False
        if self.max_bytes is not None:
            tb, tc = contracted.tensor_bytes, self.tcount
            # (ug.const is set whenever max_bytes is: here and below)
            extra = sum(tb[t] for t in contracted.const[v] if not tc.get(t))  # type: ignore[index, misc]
            if self.bytes + extra > self.max_bytes:
                return False
        return True

    def add(self, v: int) -> None:
        contracted = self.contracted
        self.size += contracted.size[v]
        for w in contracted.never.get(v, ()):
            self.forbid[w] = self.forbid.get(w, 0) + 1
        if self.max_bytes is not None:
            tc, tb = self.tcount, contracted.tensor_bytes
            for t in contracted.const[v]:  # type: ignore[index]
                k = tc.get(t, 0)
                if not k:
                    self.bytes += tb[t]
                tc[t] = k + 1

    def remove(self, v: int) -> None:
        contracted = self.contracted
        self.size -= contracted.size[v]
        for w in contracted.never.get(v, ()):
            self.forbid[w] -= 1
        if self.max_bytes is not None:
            tc, tb = self.tcount, contracted.tensor_bytes
            for t in contracted.const[v]:  # type: ignore[index]
                tc[t] -= 1
                if not tc[t]:
                    self.bytes -= tb[t]


# shared by every super-node without a refused neighbour (never changed)
_NO_SUPER_NODES: list[int] = []


def refused_neighbours(contracted: SuperNodeGraph, d: int, joinable: np.ndarray) -> list[list[int]]:
    """Per super-node, its neighbours across an edge device ``d`` may not take inside a cluster,
    among the ``joinable`` super-nodes (a bool per super-node: the only ones that ever become
    members, so no other such edge can lie between two members). Without size, constant or
    never-together limits, :meth:`GrowthState.fits` fails exactly when one of them is a member
    (see :func:`apart`); an engine then skips the state for every super-node with an empty list."""
    src, dst = np.asarray(contracted.esrc), np.asarray(contracted.edst)
    bad = ~np.asarray(contracted.ok[d], dtype=bool) & joinable[src] & joinable[dst]
    near = [_NO_SUPER_NODES] * contracted.n
    for a, b in zip(src[bad].tolist(), dst[bad].tolist()):
        for x, y in ((a, b), (b, a)):
            if near[x] is _NO_SUPER_NODES:
                near[x] = []
            near[x].append(y)
    return near


def apart(near: list[int], mem: list[int], gid: int) -> bool:
    """No super-node of ``near`` (a :func:`refused_neighbours` list) is a member of the tracker's
    growth ``gid`` (``mem``: :attr:`GrowthTracker.member_stamp`)."""
    for w in near:
        if mem[w] == gid:
            return False
    return True


__getattr__ = module_getattr(__name__, {"Piece": "GrowingCluster"}, globals())
