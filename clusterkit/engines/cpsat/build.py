"""Build: the CP-SAT model of optimal clustering, one per component of the reduced problem
(:mod:`clusterkit.engines.cpsat.reduce`). It builds variables, constraints and objective terms;
it never solves, and it never judges a partition (that is :meth:`Partition.validate`'s job).

Formulation (one *component* of a :class:`~clusterkit.engines.cpsat.reduce.SuperGraph` at a time):

- ``x[s, d]``: super-node ``s`` runs on accelerator device ``d``; ``acc[s] = sum_d x[s, d]``
  (at most 1; 0 means the fallback).
- ``r[s]``: an integer *rank*. A cluster is the set of offloaded super-nodes of one (rank,
  device); fallback nodes are singleton clusters. For every edge ``s -> t``: ``r[t] >= r[s]``,
  and ``r[t] >= r[s] + 1`` unless ``same[s, t]``, a literal that implies equal ranks, one common
  device that follows the edge, and both offloaded.

Why this describes exactly the valid partitions. (Soundness) Along every edge ranks never
decrease and they increase across every edge between two clusters, so a cycle of clusters would
need a strictly increasing rank sequence returning to its start: the quotient is acyclic. Edges
inside a cluster have ``same`` true (equal ranks and devices with ``same`` false would contradict
the strict inequality), so their device follows them and no must-cut edge lies inside. (Complete-
ness) Given any valid partition, number its clusters in a topological order of the quotient and
give every node the number of its cluster: ranks are non-decreasing along edges and strictly
increasing across clusters, two offloaded clusters never share a (rank, device), and the
numbers fit the rank domains (a topological position is at least the number of forced cuts on
any path from a source and leaves room for those after it).

Constraints per cluster use *pair literals* ``z[a, b]`` (``a`` and ``b`` share a cluster): only
upper-bounded ones (``z`` implies same rank, same device, offloaded) where the objective wants
them true, exact ones (also ``z`` when same rank and device) for sizes and constant bytes.
Pairs that can never share a cluster (:func:`clusterkit.engines.cpsat.reduce.mergeable`) have no
literal.

Objective, exactly docs/design.md's ``cut_bytes``: per tensor of ``b`` bytes with consumers ``c1 <
c2 < ...``, consumer ``ci`` pays ``b`` when it is offloaded, not in the producer's cluster, and
in the cluster of no earlier consumer (``pay_i >= acc_i - same(p, ci) - sum_j<i z[cj, ci]``);
the host unit pays ``b`` once when the producer is offloaded and some consumer is not; a graph
output pays ``b`` when produced off the host. ``partitions`` counts cluster leaders: an offloaded
super-node in the cluster of no earlier super-node. Every value is tight at an optimum, and
:meth:`ClusterModel.evaluate` computes the tight value of any assignment.
"""

from __future__ import annotations

from typing import Any, Sequence

from ortools.sat.python import cp_model

from clusterkit.engines.cpsat.reduce import (
    Reduction,
    SuperGraph,
    TensorTerm,
    mergeable,
    reachability,
)

Lit = Any  # True, False, or a CP-SAT literal


class ClusterModel:
    """The model of one component. ``w_cut``/``w_parts`` are integer weights; minimize
    :meth:`offload_expr` (fallback nodes) or :meth:`objective_expr` (the objective, without the
    constant :attr:`const`). ``full``/``blocked`` come from
    :func:`~clusterkit.engines.cpsat.reduce.reachability` and ``terms``/``never`` restrict the
    tensors and never-together pairs to this component's (all when not given). ``outside``:
    the fixed device (-1: the fallback) of super-nodes outside the component that share a tensor
    with it, when the rest of the graph is fixed rather than independent (a window of the
    large-neighbourhood search); the host unit is then charged exactly."""

    def __init__(self, sg: SuperGraph, component: Sequence[int], w_cut: int, w_parts: int,
                 full: list[int] | None = None, blocked: list[int] | None = None,
                 terms: Sequence[TensorTerm] | None = None,
                 never: Sequence[tuple[int, int]] | None = None,
                 outside: dict[int, int] | None = None):
        self.sg = sg
        self.component = list(component)
        self.inside = set(self.component)
        self.w_cut = int(w_cut)
        self.w_parts = int(w_parts)
        p = sg.problem
        self.problem = p
        self._m: cp_model.CpModel | None = None
        if full is None or blocked is None:
            full, blocked = reachability(sg)
        self.full, self.blocked = full, blocked
        self.never = set(sg.never)
        self.outside = outside
        # the tensors and never-together pairs that touch this component (all when not given)
        self.component_terms = list(sg.terms if terms is None else terms)
        self.component_never = [(a, b) for a, b in (sg.never if never is None else never)
                           if a in self.inside and b in self.inside]
        self.const = 0  # objective terms that no variable changes (in weighted units)
        self.terms: list[tuple[int, Lit]] = []  # (coefficient, literal) of the objective
        self.fb_terms: list[tuple[int, Lit]] = []
        # semantics, for hints and evaluation
        self._pairs: dict[tuple[int, int], Lit] = {}
        self._exact: set[tuple[int, int]] = set()
        self._eq: dict[tuple[int, int], Any] = {}
        self._pays: list[tuple[Any, int, list[tuple[int, int]], bool]] = []
        self._hosts: list[tuple[Any, int, list[int], bool]] = []
        self._leads: list[tuple[Any, int, list[int]]] = []
        self._has: list[tuple[Any, int, list[int]]] = []
        self._build()

    @property
    def m(self) -> cp_model.CpModel:
        """The CP-SAT model, created on first use (a lone fixed super-node never needs one)."""
        if self._m is None:
            self._m = cp_model.CpModel()
        return self._m

    @property
    def trivial(self) -> bool:
        """True when nothing is left to decide (no model was needed)."""
        return self._m is None

    # ------------------------------------------------------------------ literal helpers
    @staticmethod
    def neg(a: Lit) -> Lit:
        if a is True:
            return False
        if a is False:
            return True
        return a.Not()

    def clause(self, lits: Sequence[Lit]) -> None:
        """OR of literals (constants simplified)."""
        out = []
        for a in lits:
            if a is True:
                return
            if a is False:
                continue
            out.append(a)
        self.m.AddBoolOr(out)

    def enforce(self, ct, lits: Sequence[Lit]) -> None:
        """Enforce a linear constraint ``ct`` (already added) only if all ``lits`` hold."""
        real = []
        for a in lits:
            if a is False:
                raise AssertionError("enforce() called with a false literal")
            if a is not True:
                real.append(a)
        if real:
            ct.OnlyEnforceIf(real)

    def _add_if(self, expr, lits: Sequence[Lit]) -> None:
        if any(a is False for a in lits):
            return
        if isinstance(expr, bool):  # both sides constant
            if not expr:
                self.clause([self.neg(a) for a in lits])
            return
        self.enforce(self.m.Add(expr), lits)

    # ------------------------------------------------------------------ building
    def _build(self) -> None:
        self._variables()
        self._ranks()
        self._edges()
        for a, b in self.component_never:
            for d in set(self.x[a]) & set(self.x[b]):
                self._add_if(self.r[a] != self.r[b], [self.x[a][d], self.x[b][d]])
        self._costs()
        if self.w_parts:
            self._partitions()
        lim = self.problem.limits
        if lim.any_minimum or lim.any_maximum:
            self._sizes()
        if lim.any_bytes:
            self._const_bytes()

    def _variables(self) -> None:
        """``x[s][d]`` (on device ``d``) and ``acc[s]`` (offloaded) per super-node, and the
        fallback terms of the offload phase."""
        sg = self.sg
        lone = len(self.component) == 1
        self.x: dict[int, dict[int, Lit]] = {}
        self.acc: dict[int, Lit] = {}
        for s in self.component:
            devs = sg.devices[s] if sg.may_acc[s] else ()
            xs: dict[int, Lit] = {}
            if not devs:
                self.acc[s] = False
            elif not sg.may_fb[s] and (len(devs) == 1 or lone):
                # a lone super-node is a cluster by itself on any of its devices: the cut and the
                # partition count do not depend on which (the first whose limits it meets)
                fit = [d for d in devs if self.problem.limits.fits(sg.members[s], d)]
                xs[(fit or devs)[0]] = True
                self.acc[s] = True
            else:
                for d in devs:
                    xs[d] = self.m.NewBoolVar(f"x{s}_{d}")
                if sg.may_fb[s]:
                    a = self.m.NewBoolVar(f"acc{s}")
                    self.m.Add(sum(xs.values()) == a)
                    self.acc[s] = a
                else:
                    self.m.AddExactlyOne(list(xs.values()))
                    self.acc[s] = True
            self.x[s] = xs
            if sg.may_fb[s] and self.acc[s] is not False:  # a fixed host is a constant
                self.fb_terms.append((sg.weight(s), self.neg(self.acc[s])))

    def _ranks(self) -> None:
        """Which local edges must be cut (``strict``), and the rank variables with their
        domains: at least the forced cuts on a path from the component's sources, leaving room for
        those on a path to its sinks."""
        sg, component, masks = self.sg, self.component, self.sg.dev_mask
        self.local_edges = [(a, b) for a in component for b in sg.succ[a] if b in self.inside]
        self.strict: dict[tuple[int, int], bool] = {}
        for a, b in self.local_edges:
            common = sg.edges[(a, b)] & masks[a] & masks[b]
            self.strict[(a, b)] = not (common and self.can_share(a, b))
        lo: dict[int, int] = {}
        for s in component:
            lo[s] = max((lo[a] + self.strict[(a, s)] for a in sg.pred[s] if a in self.inside),
                        default=0)
        top = len(component) - 1
        down: dict[int, int] = {}
        for s in reversed(component):
            down[s] = max((down[b] + self.strict[(s, b)] for b in sg.succ[s]
                           if b in self.inside), default=0)
        self.lo, self.hi = lo, {s: max(lo[s], top - down[s]) for s in component}
        if len(component) == 1:
            self.r = {component[0]: 0}
        else:
            self.r = {s: self.m.NewIntVar(lo[s], self.hi[s], f"r{s}") for s in component}

    def _edges(self) -> None:
        """Ranks never decrease along an edge and increase across it unless ``same``."""
        sg, masks = self.sg, self.sg.dev_mask
        self.edge_lit: dict[tuple[int, int], Lit] = {}
        for a, b in self.local_edges:
            ra, rb = self.r[a], self.r[b]
            if self.strict[(a, b)]:
                self.m.Add(rb >= ra + 1)
                self.edge_lit[(a, b)] = False
                continue
            common = sg.edges[(a, b)] & masks[a] & masks[b]
            m = self.m
            same = m.NewBoolVar(f"same{a}_{b}")
            self.edge_lit[(a, b)] = same
            self._pairs[(a, b)] = same
            self._exact.add((a, b))
            m.Add(rb >= ra)
            m.Add(rb == ra).OnlyEnforceIf(same)
            m.Add(rb >= ra + 1).OnlyEnforceIf(same.Not())
            self._same_device(same, a, b, common)

    def _same_device(self, z, a: int, b: int, common: int) -> None:
        """``z`` implies: both offloaded, on one device of ``common`` (a device bitmask)."""
        self.clause([z.Not(), self.acc[a]])
        self.clause([z.Not(), self.acc[b]])
        for d in sorted(set(self.x[a]) | set(self.x[b])):
            xa, xb = self.x[a].get(d, False), self.x[b].get(d, False)
            if (common >> d) & 1 and xa is not False and xb is not False:
                self.clause([z.Not(), self.neg(xa), xb])
                self.clause([z.Not(), self.neg(xb), xa])
            else:
                if xa is not False:
                    self.clause([z.Not(), self.neg(xa)])
                if xb is not False:
                    self.clause([z.Not(), self.neg(xb)])

    def can_share(self, a: int, b: int) -> bool:
        return mergeable(self.sg, a, b, self.full, self.blocked, self.never)

    def pair(self, a: int, b: int, exact: bool = False) -> Lit:
        """A literal that implies "a and b share a cluster" (``exact``: and is implied by it);
        False when they never can."""
        if a > b:
            a, b = b, a
        key = (a, b)
        if self.edge_lit.get(key, None) is False or not self.can_share(a, b):
            return False
        z = self._pairs.get(key)
        if z is None:
            z = self.m.NewBoolVar(f"z{a}_{b}")
            self._pairs[key] = z
            self.m.Add(self.r[a] == self.r[b]).OnlyEnforceIf(z)
            common = 0
            for d in set(self.x[a]) & set(self.x[b]):
                common |= 1 << d
            self._same_device(z, a, b, common)
        if exact and key not in self._exact:
            self._exact.add(key)
            e = self.m.NewBoolVar(f"eq{a}_{b}")
            self._eq[key] = e
            self.m.Add(self.r[a] == self.r[b]).OnlyEnforceIf(e)
            self.m.Add(self.r[a] != self.r[b]).OnlyEnforceIf(e.Not())
            for d in set(self.x[a]) & set(self.x[b]):
                self.clause([e.Not(), self.neg(self.x[a][d]), self.neg(self.x[b][d]), z])
        return z

    def _costs(self) -> None:
        sg = self.sg
        wc = self.w_cut
        if not wc:
            return
        for term in self.component_terms:
            p = term.producer
            own = p >= 0 and p in self.inside
            cons = [c for c in term.consumers if c in self.inside]
            b = term.nbytes * wc
            if own:
                pa = self.acc[p]
                if term.is_output:
                    self._add_term(b, pa)
                host_cons = [c for c in term.consumers if c in self.inside and sg.may_fb[c]]
                fixed_host = self._host_outside(term)
                if pa is not False and (host_cons or fixed_host):
                    if pa is True and (fixed_host or any(self.acc[c] is False
                                                         for c in host_cons)):
                        self.const += b
                    else:
                        h = self.m.NewBoolVar(f"h{term.tensor}")
                        for c in host_cons:
                            self.clause([h, self.acc[c], self.neg(pa)])
                        if fixed_host:
                            self.clause([h, self.neg(pa)])
                        self._hosts.append((h, p, host_cons, fixed_host))
                        self.terms.append((b, h))
            elif self.outside is not None and p >= 0 and self.outside.get(p, -1) >= 0:
                self._host_unit_of_outside(term, b)
            # accelerator consuming units
            done: list[int] = []
            for c in cons:
                ac = self.acc[c]
                if ac is False:
                    continue
                avoid: list[Lit] = []
                sem: list[tuple[int, int]] = []
                if own:
                    e = self.edge_lit.get((p, c), False)
                    if e is not False:
                        avoid.append(e)
                        sem.append((p, c))
                for j in done:
                    z = self.pair(j, c)
                    if z is not False:
                        avoid.append(z)
                        sem.append((j, c))
                done.append(c)
                pay = self._charge_unless(b, ac, avoid, f"pay{term.tensor}_{c}")
                if pay is not None:
                    self._pays.append((pay, c, sem, True))

    def _host_outside(self, term: TensorTerm) -> bool:
        """Does the host consume ``term`` outside the component (a fixed host node, a node out of
        the model, or with ``outside``, a node fixed on the fallback)?"""
        if term.host_consumer:
            return True
        out = self.outside
        return any(c not in self.inside and (not self.sg.may_acc[c]
                                             or (out is not None and out.get(c, 0) < 0))
                   for c in term.consumers)

    def _host_unit_of_outside(self, term: TensorTerm, coef: int) -> None:
        """A tensor produced off the host outside the component: the host unit pays once when a
        consumer of the component is on the fallback, unless one outside already is."""
        if self._host_outside(term):
            return
        if any(self.acc[c] is False for c in term.consumers if c in self.inside):
            self.const += coef
            return
        host_cons = [c for c in term.consumers if c in self.inside and self.sg.may_fb[c]]
        if not host_cons:
            return
        h = self.m.NewBoolVar(f"h{term.tensor}")
        for c in host_cons:
            self.clause([h, self.acc[c]])
        self._hosts.append((h, -1, host_cons, True))
        self.terms.append((coef, h))

    def _add_term(self, coef: int, lit: Lit) -> None:
        if lit is True:
            self.const += coef
        elif lit is not False:
            self.terms.append((coef, lit))

    def _charge_unless(self, coef: int, lit: Lit, avoid: list[Lit], name: str) -> Lit | None:
        """Charge ``coef`` when ``lit`` holds and no literal of ``avoid`` does: through a new
        literal (returned) when there is something to avoid, else on ``lit`` itself (None)."""
        if not avoid:
            self._add_term(coef, lit)
            return None
        pay = self.m.NewBoolVar(name)
        self.clause([pay, self.neg(lit)] + avoid)
        self.terms.append((coef, pay))
        return pay

    def _partitions(self) -> None:
        wp = self.w_parts
        earlier: list[int] = []
        for s in self.component:
            a = self.acc[s]
            if a is False:
                continue
            avoid = []
            sem = []
            for t in earlier:
                z = self.pair(t, s)
                if z is not False:
                    avoid.append(z)
                    sem.append(t)
            earlier.append(s)
            lead = self._charge_unless(wp, a, avoid, f"lead{s}")
            if lead is not None:
                self._leads.append((lead, s, sem))

    def _sizes(self) -> None:
        p = self.problem
        sg = self.sg
        for s in self.component:
            a = self.acc[s]
            if a is False:
                continue
            pairs = [(sg.weight(t), self.pair(s, t, exact=True)) for t in self.component
                     if t != s]
            pairs = [(w, z) for w, z in pairs if z is not False]
            expr = sum(w * z for w, z in pairs) + sg.weight(s)
            lo, hi = p.limits.loosest_min, p.limits.loosest_max
            if lo > 1:
                self._add_if(expr >= lo, [a])
            if hi is not None:
                self._add_if(expr <= hi, [a])
            self._device_sizes(s, expr)

    def _device_sizes(self, s: int, expr) -> None:
        """The cluster of super-node ``s`` (``expr`` nodes) within the node limits of its
        device where they are tighter than the problem's (a device's own)."""
        lim = self.problem.limits
        for d, on_d in self.x[s].items():
            lo, hi = lim.min_nodes[d], lim.max_nodes[d]
            if lo > lim.loosest_min:
                self._add_if(expr >= lo, [on_d])
            if hi is not None and (lim.loosest_max is None or hi < lim.loosest_max):
                self._add_if(expr <= hi, [on_d])

    def _const_bytes(self) -> None:
        p = self.problem
        sg = self.sg
        g = p.graph
        reads: dict[int, dict[str, int]] = {}
        for s in self.component:
            row: dict[str, int] = {}
            for v in sg.members[s]:
                for t in g.nodes[v].all_inputs():
                    ten = g.tensors[t]
                    if ten.is_constant and ten.nbytes:
                        row[t] = ten.nbytes
            reads[s] = row
        readers: dict[str, list[int]] = {}
        for s in self.component:
            for t in reads[s]:
                readers.setdefault(t, []).append(s)
        for s in self.component:
            a = self.acc[s]
            if a is False:
                continue
            own = sum(reads[s].values())
            terms = []
            for t in sorted(readers):
                if t in reads[s]:
                    continue
                zs = [self.pair(s, o, exact=True) for o in readers[t]]
                zs = [z for z in zs if z is not False]
                if not zs:
                    continue
                has = self.m.NewBoolVar(f"has{s}_{len(self._has)}")
                for z in zs:
                    self.clause([has, z.Not()])
                others = [o for o in readers[t] if self.pair(s, o) is not False]
                self._has.append((has, s, others))
                terms.append(g.tensors[t].nbytes * has)
            held = sum(terms) + own
            loose = p.limits.loosest_bytes
            if loose is not None:
                self._add_if(held <= loose, [a])
            for d, on_d in self.x[s].items():  # a device's own budget, where tighter
                cb = p.limits.max_const[d]
                if cb is not None and (loose is None or cb < loose):
                    self._add_if(held <= cb, [on_d])

    # ------------------------------------------------------------------ objective
    def objective_expr(self):
        return sum(c * v for c, v in self.terms)

    def offload_expr(self):
        return sum(c * v for c, v in self.fb_terms)

    # ------------------------------------------------------------------ semantics
    def evaluate(self, rank: dict[int, int], device: dict[int, int]) -> dict[Any, int]:
        """Tight value of every model variable for an assignment (rank, device; -1 = fallback)."""
        vals: dict[Any, int] = {}

        def key(s: int):
            return (rank[s], device[s]) if device[s] >= 0 else ("fb", s)

        def same(a: int, b: int) -> bool:
            return device[a] >= 0 and key(a) == key(b)

        for s in self.component:
            for d, lit in self.x[s].items():
                if lit is not True:
                    vals[lit] = int(device[s] == d)
            a = self.acc[s]
            if a is not True and a is not False:
                vals[a] = int(device[s] >= 0)
            if not isinstance(self.r[s], int):
                vals[self.r[s]] = rank[s]
        for (a, b), z in self._pairs.items():
            vals[z] = int(same(a, b))
        for (a, b), e in self._eq.items():
            vals[e] = int(rank[a] == rank[b])
        for pay, c, sem, _ in self._pays:
            vals[pay] = int(device[c] >= 0 and not any(same(a, b) for a, b in sem))
        for h, p, cons, fixed in self._hosts:  # p = -1: produced off the host outside
            vals[h] = int((p < 0 or device[p] >= 0)
                          and (any(device[c] < 0 for c in cons) or (fixed and p >= 0)))
        for lead, s, earlier in self._leads:
            vals[lead] = int(device[s] >= 0 and not any(same(t, s) for t in earlier))
        for has, s, others in self._has:
            vals[has] = int(any(same(s, o) for o in others))
        return vals

    def value(self, vals: dict[Any, int], which: str = "objective") -> int:
        """Objective (or, with ``which="offload"``, fallback-node) value of evaluated
        variables."""
        terms = self.terms if which == "objective" else self.fb_terms
        by_index = {var.Index(): val for var, val in vals.items()}
        total = 0
        for c, lit in terms:
            if lit is True:
                total += c
                continue
            i = lit.Index()
            total += c * (by_index[i] if i >= 0 else 1 - by_index[-i - 1])
        return total

    def in_domain(self, rank: dict[int, int], device: dict[int, int]) -> bool:
        """Is the assignment within the model's variables: allowed devices, fallback only where
        allowed, ranks within their domains, non-decreasing along edges and equal only across an
        edge that may lie inside a cluster on that device? (Whether its clusters form a valid
        partition is :meth:`Partition.validate`'s question, asked of the result.)"""
        sg = self.sg
        for s in self.component:
            d = device[s]
            if (d >= 0 and d not in self.x[s]) or (d < 0 and not sg.may_fb[s]):
                return False
            if not self.lo[s] <= rank[s] <= self.hi[s]:
                return False
        for (a, b), lit in self.edge_lit.items():
            if rank[b] < rank[a]:
                return False
            if rank[b] == rank[a] and not (lit is not False and device[a] >= 0
                                           and device[a] == device[b]
                                           and (sg.edges[(a, b)] >> device[a]) & 1):
                return False
        return True

    def hint(self, rank: dict[int, int], device: dict[int, int]) -> None:
        self.m.ClearHints()
        for var, val in self.evaluate(rank, device).items():
            self.m.AddHint(var, val)


def build_models(red: Reduction, w_cut: int, w_parts: int) -> list[ClusterModel]:
    """One model per component of ``red`` (in the order of ``red.components``) for integer
    weights."""
    full, blocked = reachability(red.graph)
    terms, never = _index_by_component(red)
    return [ClusterModel(red.graph, component, w_cut, w_parts, full, blocked, terms[i], never[i])
            for i, component in enumerate(red.components)]


def _index_by_component(red: Reduction
                        ) -> tuple[list[list[TensorTerm]], list[list[tuple[int, int]]]]:
    """The tensor terms and never-together pairs touching each component."""
    sg = red.graph
    component_of = [0] * sg.size
    for i, component in enumerate(red.components):
        for s in component:
            component_of[s] = i
    terms: list[list[TensorTerm]] = [[] for _ in red.components]
    for term in sg.terms:
        seen = {component_of[c] for c in term.consumers}
        if term.producer >= 0:
            seen.add(component_of[term.producer])
        for i in sorted(seen):
            terms[i].append(term)
    never: list[list[tuple[int, int]]] = [[] for _ in red.components]
    for a, b in sg.never:
        if component_of[a] == component_of[b]:
            never[component_of[a]].append((a, b))
    return terms, never


def read_component(model: ClusterModel, solver: cp_model.CpSolver
                   ) -> tuple[dict[int, int], dict[int, int]]:
    """Rank and device (-1: fallback) per super-node of the component from a solved model."""
    rank, device = {}, {}
    for s in model.component:
        r = model.r[s]
        rank[s] = r if isinstance(r, int) else int(solver.Value(r))
        device[s] = -1
        for d, lit in model.x[s].items():
            if lit is True or solver.BooleanValue(lit):
                device[s] = d
                break
    return rank, device
