"""Queue stations and pull relations: parse-time forms (docs/pd.md, "Queue stations").

A ``queue`` declares one station whole — its pools, its stage, its NIC and its
*entries*, what the station does with one request — and ``D pull P …`` says
which queue reads KV from which over their NICs.  Nothing downstream knows of
them: this pass puts, in each station's place, the kernel's pools (``Q.p``),
stage (``Q``), NIC (``Q.nic``) and a link's latency stage (``Q.latency``), and a
relation's wait stage (``D.nic.latency``) and ``share``; the expander then
writes each call of an entry (``Q[i].verb (…) from S[k]``) as the entry's body
in place, with its parameters, own pools and stage, ``self`` and ``from`` name
substituted and its own attributes named ``Q.x`` (:class:`Stations`).
"""

from __future__ import annotations

from dataclasses import field, replace

from ..errors import Span
from ..node import record
from . import ast as A
from .diag import at, error
from .words import CONTEXT, OBSERVABLE

#: The roles a queue may play: its entries as (verb, parameters, takes `from`).
ROLES: dict[str, tuple[tuple[str, int, bool], ...]] = {
    "gateway": (("route", 0, False),),
    "prefill": (("prefill", 1, False),),
    "decode": (("decode", 1, False), ("decode", 1, True)),
    "link": (("transfer", 1, False),),
}
SERVING_WORDS = ("prefill", "decode", "tool", "transfer", "gateway", "link")
#: What an entry reads besides its own: the attributes the scheduler sets, and words the language supplies.
BUILTINS = frozenset(("cached", "computed", "serial", "turn_no", "now", "self", "inf"))


@record
class Station:
    """A declared queue and what its calls need."""

    item: A.QueueItem
    size: "int | A.Expr | None"
    pools: tuple[str, ...]
    roles: tuple[str, ...]
    entries: dict[tuple[str, bool], A.QueueEntry]
    locals: dict[tuple[str, bool], frozenset[str]]
    leases: dict[tuple[str, bool], str | None]  # the pool an entry leases on every way through it
    latency: A.Expr | None = None  # a link's wait before a `transfer on` it
    pulls: tuple[str, A.Expr | None] | None = None  # `Q pull S latency x`: (S, x)
    attributes: frozenset[str] = frozenset()

    @property
    def name(self) -> str:
        return self.item.name

    @property
    def family(self) -> bool:
        return self.item.family

    def member(self, name: str, index: A.Expr | None, span: Span) -> A.Expr:
        """``Q.name`` for the member ``index`` picks (a family), or for the one queue."""
        return A.Index(name, index, span, span) if self.family and index is not None else A.Name(name, span)


@record
class Stations:
    """The queues and relations of a program, by name."""

    queues: dict[str, Station] = field(default_factory=dict)

    def gateway(self, name: str) -> Station | None:
        st = self.queues.get(name)
        return st if st is not None and "gateway" in st.roles else None


def _leases_always(block: A.Block) -> str | None:
    """The pool every way through ``block`` leases (a hold with ``lease`` at its top
    level, or a branch both of whose sides do), or None."""
    for s in block:
        if isinstance(s, A.HoldStmt) and s.lease is not None:
            return s.lease.ref.name
        if isinstance(s, A.BranchStmt) and s.orelse is not None:
            a, b = _leases_always(s.then), _leases_always(s.orelse)
            if a is not None and a == b:
                return a
    return None


def _leased(block: A.Block) -> set[str]:
    return {s.lease.ref.name for s in A.walk_stmts(block) if isinstance(s, A.HoldStmt) and s.lease is not None}


def _assigned(block: A.Block) -> set[str]:
    out: set[str] = set()
    for s in A.walk_stmts(block):
        if isinstance(s, (A.SetStmt, A.ChooseStmt, A.MarkStmt)):
            out.add(s.name)
    return out


def _constant(e: A.Expr, lets: set[str]) -> bool:
    """A number or a constant over `let`s (no draw, no state, no attribute)."""
    for x in A.walk_expr(e):
        if isinstance(x, A.Draw) or isinstance(x, A.Aggregate):
            return False
        if isinstance(x, A.Call) and (x.fn in OBSERVABLE or x.fn == "blocksize"):
            return False
        if isinstance(x, (A.Name, A.Index)) and x.id not in lets:
            return False
    return True


def declare(items: list[A.Item]) -> tuple[list[A.Item], Stations]:
    """The items with every queue and relation replaced by the kernel declarations
    they stand for, in their place; the stations, for the expander."""
    stations = Stations()
    lets: set[str] = set()
    out: list[A.Item] = []
    share: A.ShareItem | None = None
    relation_share: A.PullItem | None = None
    for item in items:
        if isinstance(item, A.LetItem):
            lets.add(item.name)
            lets.update(item.choices)  # constants too (docs/language.md, "A choice among names")
        if isinstance(item, A.ShareItem):
            if relation_share is not None:
                raise error(f"`share` is given twice: the pull relation at {at(relation_share.span)} "
                            "names the program's policy", replace(item.span, end=item.span.start + 5))
            share = item
        if isinstance(item, A.QueueItem):
            out += _station(item, stations, lets)
        elif isinstance(item, A.PullItem):
            got = _relation(item, stations, lets, share, relation_share)
            if relation_share is None:
                relation_share = item
                out.append(A.ShareItem(item.share, item.span))  # type: ignore[arg-type]
            out += got
        else:
            out.append(item)
    return out, stations


def _station(q: A.QueueItem, stations: Stations, lets: set[str]) -> list[A.Item]:
    name = q.name
    if name in SERVING_WORDS:
        raise error(f"`{name}` is a serving word; a queue needs another name", q.name_span)
    if name in stations.queues:
        raise error(f"duplicate queue `{name}`", q.name_span)
    roles: list[str] = []
    for r, span in q.roles:
        if r not in ROLES:
            raise error(f"unknown role `{r}`: a queue plays gateway, prefill, decode or link", span)
        if r in roles:
            raise error(f"role `{r}` twice", span)
        roles.append(r)
    if "gateway" in roles and q.family:
        raise error("a gateway is one queue, not a family: the requests enter it", q.name_span)
    if q.latency is not None:
        if "link" not in roles:
            raise error("`latency` belongs to the `serve` of a queue that plays `link`: a link's fixed wait",
                        q.latency.span)
        if not _constant(q.latency, lets):
            raise error("`latency` is a number or a constant over `let`s: a link's fixed wait, the same for "
                        "every transfer", q.latency.span)
    entries: dict[tuple[str, bool], A.QueueEntry] = {}
    for e in q.entries:
        key = (e.verb, e.source is not None)
        if key in entries:
            raise error(f"queue `{name}` has `{e.verb}` twice", e.name_span)
        allowed = [(r, spec) for r in ROLES for spec in ROLES[r] if spec[0] == e.verb]
        if not allowed:
            raise error(f"`{e.verb}` is not an entry of any role", e.name_span)
        mine = [(r, spec) for r, spec in allowed if r in roles]
        if not mine:
            raise error(f"`{e.verb}` is an entry of a `{allowed[0][0]}` queue; declare `queue {name} : "
                        f"{allowed[0][0]}`", e.name_span)
        fits = [spec for _r, spec in mine if spec[2] == (e.source is not None)]
        if not fits:
            raise error(f"`{e.verb}` is not an entry of any role: `{e.verb}` "
                        f"{'takes no' if e.source is not None else 'needs'} `from`", e.name_span)
        if len(e.params) != fits[0][1]:
            raise error(f"`{name}.{e.verb}` takes {fits[0][1]} parameter(s), as the role says; it declares "
                        f"{len(e.params)}", e.name_span)
        entries[key] = e
    for r in roles:
        verb, _n, _f = ROLES[r][0]
        if r == "link":
            if q.serve is None and ("transfer", False) not in entries:
                raise error(f"queue `{name}` plays `link` and has neither a `serve` nor a `transfer` entry: "
                            "nothing says what a transfer over it costs", q.name_span)
            continue
        if (verb, False) not in entries:
            raise error(f"queue `{name}` plays `{r}` and has no `{verb}` entry", q.name_span)
    if q.latency is not None and ("transfer", False) in entries:
        raise error(f"queue `{name}` has a `transfer` entry and a `latency`: a called link's time is its "
                    "entry's; write the latency in the entry body", q.latency.span)
    pools = tuple(p.name for p in q.pools)
    locals_: dict[tuple[str, bool], frozenset[str]] = {}
    leases: dict[tuple[str, bool], str | None] = {}
    for key, e in entries.items():
        assigned = _assigned(e.body) if e.verb != "route" else set()
        for p in e.params:
            if p in assigned:
                raise error(f"`{name}.{e.verb}` sets its parameter `{p}`", e.name_span)
        for x in sorted(assigned & lets):
            raise error(f"`{name}.{e.verb}` sets `{x}`, a `let` constant: the header would read the constant "
                        "and the body the attribute", e.name_span, helps=["name the attribute otherwise"])
        locals_[key] = frozenset(assigned)
        leased = _leased(e.body)
        for lp in sorted(leased):
            if lp not in pools:
                raise error(f"`{name}.{e.verb}` leases `{lp}`, which is not a pool of `{name}`", e.name_span)
        leases[key] = _leases_always(e.body)
    all_leased = {lp for e in entries.values() for lp in _leased(e.body)}
    if len(all_leased) > 1:
        a, b = sorted(all_leased)[:2]
        raise error(f"`{name}` leases `{a}` and `{b}`: a `from {name}` needs one pool to take", q.name_span)
    attributes = frozenset(x for s in locals_.values() for x in s)
    station = Station(q, q.size, pools, tuple(roles), entries, locals_, leases, q.latency, None, attributes)
    stations.queues[name] = station
    size = q.size if q.family else None
    out: list[A.Item] = []
    for pool in q.pools:
        clauses = tuple(A.Clause(c.word, _own_name(c.value, name, pools), c.span) if c.word == "admit" else c
                        for c in pool.clauses)
        out.append(replace(pool, name=f"{name}.{pool.name}", size=size, clauses=clauses))
    if q.serve is not None:
        clauses = tuple(A.Clause(c.word, _own_name(c.value, name, pools), c.span) if c.word == "memory" else c
                        for c in q.serve.clauses)
        out.append(replace(q.serve, name=name, size=size, clauses=clauses))
    if q.nic is not None:
        out.append(replace(q.nic, name=f"{name}.nic", size=size))
    if q.latency is not None:
        out.append(A.StageItem(f"{name}.latency", size, "delay", None, (), q.latency.span, q.latency.span))
    return out


def _own_name(v: object, queue: str, pools: tuple[str, ...]) -> object:
    """`memory kv` / `admit via Q` inside a queue: its own pool is ``Q.kv``; the own stage is ``Q``."""
    if isinstance(v, A.Name) and v.id in pools:
        return A.Name(f"{queue}.{v.id}", v.span)
    return v


def _relation(r: A.PullItem, stations: Stations, lets: set[str], share: A.ShareItem | None,
              first: A.PullItem | None) -> list[A.Item]:
    text = f"`{r.reader} pull {r.source}`"
    for name, span in ((r.reader, r.reader_span), (r.source, r.source_span)):
        if name not in stations.queues:
            raise error(f"{text}: no queue `{name}` is declared above", span)
    for name, span in ((r.source, r.source_span), (r.reader, r.reader_span)):
        if stations.queues[name].item.nic is None:
            raise error(f"{text}: queue `{name}` has no `nic`; a read runs over the source's NIC and the "
                        "reader's", span)
    if r.reader == r.source:
        raise error(f"{text}: a queue reads from another", r.source_span)
    reader = stations.queues[r.reader]
    if reader.pulls is not None:
        raise error(f"`{r.reader}` pulls from `{reader.pulls[0]}` already: one relation per reader", r.reader_span)
    if r.latency is not None and not _constant(r.latency, lets):
        raise error("`latency` is a number or a constant over `let`s: the reader's fixed wait before each read",
                    r.latency.span)
    if r.share is None:
        raise error(f"{text} names how concurrent reads divide the NICs: `share maxmin` or `share bottleneck`",
                    r.span)
    if share is not None:
        raise error("`share` is declared on its own and on the relation: the relation names it", share.span)
    if first is not None and first.share != r.share:
        raise error("the program divides shared stages by one policy: every relation and `share` names the same",
                    r.span)
    reader.pulls = (r.source, r.latency)
    out: list[A.Item] = []
    if r.latency is not None:
        size = reader.size if reader.family else None
        out.append(A.StageItem(f"{r.reader}.nic.latency", size, "delay", None, (), r.span, r.reader_span))
    return out


def check_entry(st: Station, e: A.QueueEntry, lets: set[str], hidden: set[str], stages: dict[str, str],
                others: dict[str, Station]) -> None:
    """What an entry may read and hold: its own (docs/pd.md, "What an entry sees")."""
    if e.verb == "route":
        return
    q = st.name
    key = (e.verb, e.source is not None)
    mine = set(e.params) | set(st.pools) | {q} | BUILTINS | set(CONTEXT) | lets
    bindings = {b.name for s in A.walk_stmts(e.body) if isinstance(s, A.HoldStmt) for b in s.bindings}
    body_ok = mine | st.locals[key] | hidden | bindings | {n for n, kind in stages.items() if kind != "step"}
    where = f"`{q}.{e.verb}`"
    for s in A.walk_stmts(e.body):
        header: list[A.Expr] = []
        bound: set[str] = set()
        if isinstance(s, A.HoldStmt):
            bound = {b.name for b in s.bindings}
            for p in s.pools:
                header += [p.units, *([p.reserve] if p.reserve is not None else [])]
            header += [*([s.reuse] if s.reuse is not None else []), *(b.expr for b in s.bindings)]
            for hp in [p.ref for p in s.pools] + ([s.lease.ref] if s.lease else []):
                _own_pool(st, e, hp)
        elif isinstance(s, (A.GrowStmt, A.DropStmt, A.ReleaseStmt, A.LoadStmt)):
            _own_pool(st, e, s.ref)
        for x in header:
            for n in A.walk_expr(x):
                if isinstance(n, (A.Name, A.Index)) and n.id not in mine | bound and n.id != e.source:
                    raise error(f"{where}: the header reads `{n.id}`; an entry's header sees its parameters and "
                                f"the queue's pools and stage. Pass `{n.id}` as a parameter", n.span)
        for x in A.stmt_exprs(s):
            for n in A.walk_expr(x):
                if not isinstance(n, (A.Name, A.Index)):
                    continue
                if "." in n.id:
                    owner = n.id.split(".", 1)[0]
                    if owner in others and owner != q and n.id.split(".", 1)[1] in others[owner].attributes:
                        raise error(f"{where} reads `{n.id}`, another queue's: an entry sees its own; the "
                                    "gateway reads across queues and passes what an entry needs", n.span)
                    raise error(f"{where} reads `{n.id}`, which is not a pool or stage of `{q}`: a queue sees "
                                "its own; the deployment reads across queues", n.span)
                if e.source is not None and n.id == e.source and isinstance(n, A.Name):
                    raise error(f"{where} reads `{n.id}` as a number: `{n.id}` is the source pool, and only in "
                                f"an index the source member (`L[{n.id}]`)", n.span)
                if n.id not in body_ok | bound and n.id != e.source:
                    raise error(f"{where} reads `{n.id}`, a session attribute set outside the queue: an entry "
                                "sees its parameters, the queue's pools, the context and the request's `hidden` "
                                f"attributes; pass `{n.id}` as a parameter or `mark` a moment for the caller "
                                "to read", n.span)


def _own_pool(st: Station, e: A.QueueEntry, r: A.Ref) -> None:
    if r.name in st.pools or r.name == e.source:
        return
    src = f" and `{e.source}`, the pool its `from` names" if e.source else ""
    raise error(f"`{st.name}.{e.verb}` holds `{r.name}`, which is not a pool of `{st.name}`: an entry allocates "
                f"its queue's own pools{src}", r.name_span)
