"""The ``__init__`` of every ``@node`` and ``@record`` class, compiled with the package
(written by ``python -m serq.node``; tests/test_node.py checks it is current).
"""

# ruff: noqa
# mypy: ignore-errors
CODES = {}


def __init__(self, ):
  pass
CODES['def __init__(self, ):\n  pass\n'] = __init__.__code__


def __init__(self, begin, span):
  _set(self, 'begin', begin)
  _set(self, 'span', span)
CODES["def __init__(self, begin, span):\n  _set(self, 'begin', begin)\n  _set(self, 'span', span)\n"] = __init__.__code__


def __init__(self, body):
  _set(self, 'body', body)
CODES["def __init__(self, body):\n  _set(self, 'body', body)\n"] = __init__.__code__


def __init__(self, body, span):
  _set(self, 'body', body)
  _set(self, 'span', span)
CODES["def __init__(self, body, span):\n  _set(self, 'body', body)\n  _set(self, 'span', span)\n"] = __init__.__code__


def __init__(self, c, a, b):
  _set(self, 'c', c)
  _set(self, 'a', a)
  _set(self, 'b', b)
CODES["def __init__(self, c, a, b):\n  _set(self, 'c', c)\n  _set(self, 'a', a)\n  _set(self, 'b', b)\n"] = __init__.__code__


def __init__(self, c, a, b, span):
  _set(self, 'c', c)
  _set(self, 'a', a)
  _set(self, 'b', b)
  _set(self, 'span', span)
CODES["def __init__(self, c, a, b, span):\n  _set(self, 'c', c)\n  _set(self, 'a', a)\n  _set(self, 'b', b)\n  _set(self, 'span', span)\n"] = __init__.__code__


def __init__(self, clauses, span):
  _set(self, 'clauses', clauses)
  _set(self, 'span', span)
CODES["def __init__(self, clauses, span):\n  _set(self, 'clauses', clauses)\n  _set(self, 'span', span)\n"] = __init__.__code__


def __init__(self, cost, budget=None, chunk=None, serve=None, memory=None, only=None):
  _set(self, 'cost', cost)
  _set(self, 'budget', budget)
  _set(self, 'chunk', chunk)
  _set(self, 'serve', serve)
  _set(self, 'memory', memory)
  _set(self, 'only', only)
CODES["def __init__(self, cost, budget=_d_budget, chunk=_d_chunk, serve=_d_serve, memory=_d_memory, only=_d_only):\n  _set(self, 'cost', cost)\n  _set(self, 'budget', budget)\n  _set(self, 'chunk', chunk)\n  _set(self, 'serve', serve)\n  _set(self, 'memory', memory)\n  _set(self, 'only', only)\n"] = __init__.__code__


def __init__(self, count, mean, ci, cv2, p99, p50=None, p90=None, p95=None):
  self.count = count
  self.mean = mean
  self.ci = ci
  self.cv2 = cv2
  self.p99 = p99
  self.p50 = p50
  self.p90 = p90
  self.p95 = p95
CODES['def __init__(self, count, mean, ci, cv2, p99, p50=_d_p50, p90=_d_p90, p95=_d_p95):\n  self.count = count\n  self.mean = mean\n  self.ci = ci\n  self.cv2 = cv2\n  self.p99 = p99\n  self.p50 = p50\n  self.p90 = p90\n  self.p95 = p95\n'] = __init__.__code__


def __init__(self, count, name, sets, span, head, name_span):
  _set(self, 'count', count)
  _set(self, 'name', name)
  _set(self, 'sets', sets)
  _set(self, 'span', span)
  _set(self, 'head', head)
  _set(self, 'name_span', name_span)
CODES["def __init__(self, count, name, sets, span, head, name_span):\n  _set(self, 'count', count)\n  _set(self, 'name', name)\n  _set(self, 'sets', sets)\n  _set(self, 'span', span)\n  _set(self, 'head', head)\n  _set(self, 'name_span', name_span)\n"] = __init__.__code__


def __init__(self, dist, args):
  _set(self, 'dist', dist)
  _set(self, 'args', args)
CODES["def __init__(self, dist, args):\n  _set(self, 'dist', dist)\n  _set(self, 'args', args)\n"] = __init__.__code__


def __init__(self, dist, args, span, name_span):
  _set(self, 'dist', dist)
  _set(self, 'args', args)
  _set(self, 'span', span)
  _set(self, 'name_span', name_span)
CODES["def __init__(self, dist, args, span, name_span):\n  _set(self, 'dist', dist)\n  _set(self, 'args', args)\n  _set(self, 'span', span)\n  _set(self, 'name_span', name_span)\n"] = __init__.__code__


def __init__(self, exprs, span):
  _set(self, 'exprs', exprs)
  _set(self, 'span', span)
CODES["def __init__(self, exprs, span):\n  _set(self, 'exprs', exprs)\n  _set(self, 'span', span)\n"] = __init__.__code__


def __init__(self, figure, op, bound):
  _set(self, 'figure', figure)
  _set(self, 'op', op)
  _set(self, 'bound', bound)
CODES["def __init__(self, figure, op, bound):\n  _set(self, 'figure', figure)\n  _set(self, 'op', op)\n  _set(self, 'bound', bound)\n"] = __init__.__code__


def __init__(self, fixed, pools=None, stages=None, room=None):
  _set(self, 'fixed', fixed)
  _set(self, 'pools', pools)
  _set(self, 'stages', stages)
  _set(self, 'room', room)
CODES["def __init__(self, fixed, pools=_d_pools, stages=_d_stages, room=_d_room):\n  _set(self, 'fixed', fixed)\n  _set(self, 'pools', pools)\n  _set(self, 'stages', stages)\n  _set(self, 'room', room)\n"] = __init__.__code__


def __init__(self, fn, args):
  _set(self, 'fn', fn)
  _set(self, 'args', args)
CODES["def __init__(self, fn, args):\n  _set(self, 'fn', fn)\n  _set(self, 'args', args)\n"] = __init__.__code__


def __init__(self, fn, args, span, name_span):
  _set(self, 'fn', fn)
  _set(self, 'args', args)
  _set(self, 'span', span)
  _set(self, 'name_span', name_span)
CODES["def __init__(self, fn, args, span, name_span):\n  _set(self, 'fn', fn)\n  _set(self, 'args', args)\n  _set(self, 'span', span)\n  _set(self, 'name_span', name_span)\n"] = __init__.__code__


def __init__(self, fn, obs):
  _set(self, 'fn', fn)
  _set(self, 'obs', obs)
CODES["def __init__(self, fn, obs):\n  _set(self, 'fn', fn)\n  _set(self, 'obs', obs)\n"] = __init__.__code__


def __init__(self, fn, target, args=None):
  _set(self, 'fn', fn)
  _set(self, 'target', target)
  _set(self, 'args', args)
CODES["def __init__(self, fn, target, args=_d_args):\n  _set(self, 'fn', fn)\n  _set(self, 'target', target)\n  _set(self, 'args', args)\n"] = __init__.__code__


def __init__(self, guard, then, orelse, draw, span, head):
  _set(self, 'guard', guard)
  _set(self, 'then', then)
  _set(self, 'orelse', orelse)
  _set(self, 'draw', draw)
  _set(self, 'span', span)
  _set(self, 'head', head)
CODES["def __init__(self, guard, then, orelse, draw, span, head):\n  _set(self, 'guard', guard)\n  _set(self, 'then', then)\n  _set(self, 'orelse', orelse)\n  _set(self, 'draw', draw)\n  _set(self, 'span', span)\n  _set(self, 'head', head)\n"] = __init__.__code__


def __init__(self, guard, then, orelse=None, label=None):
  _set(self, 'guard', guard)
  _set(self, 'then', then)
  _set(self, 'orelse', orelse)
  _set(self, 'label', label)
CODES["def __init__(self, guard, then, orelse=_d_orelse, label=_d_label):\n  _set(self, 'guard', guard)\n  _set(self, 'then', then)\n  _set(self, 'orelse', orelse)\n  _set(self, 'label', label)\n"] = __init__.__code__


def __init__(self, handle, count, sets=None, label=None):
  _set(self, 'handle', handle)
  _set(self, 'count', count)
  _set(self, 'sets', sets)
  _set(self, 'label', label)
CODES["def __init__(self, handle, count, sets=_d_sets, label=_d_label):\n  _set(self, 'handle', handle)\n  _set(self, 'count', count)\n  _set(self, 'sets', sets)\n  _set(self, 'label', label)\n"] = __init__.__code__


def __init__(self, handle, label=None):
  _set(self, 'handle', handle)
  _set(self, 'label', label)
CODES["def __init__(self, handle, label=_d_label):\n  _set(self, 'handle', handle)\n  _set(self, 'label', label)\n"] = __init__.__code__


def __init__(self, horizon, end, warmup, seed, events, arrivals, ended, turns, mean_live, observes=None, client=None, stages=None, pools=None, notes=None, samples=None, stage_warnings=None, tasks=None, replay=None, steps=None, gauges=None, settling=None, precision=None, timeline=None, stage_totals=None, pool_totals=None, claims=None):
  self.horizon = horizon
  self.end = end
  self.warmup = warmup
  self.seed = seed
  self.events = events
  self.arrivals = arrivals
  self.ended = ended
  self.turns = turns
  self.mean_live = mean_live
  if observes is MISSING: observes = _f_observes()
  self.observes = observes
  if client is MISSING: client = _f_client()
  self.client = client
  if stages is MISSING: stages = _f_stages()
  self.stages = stages
  if pools is MISSING: pools = _f_pools()
  self.pools = pools
  if notes is MISSING: notes = _f_notes()
  self.notes = notes
  if samples is MISSING: samples = _f_samples()
  self.samples = samples
  if stage_warnings is MISSING: stage_warnings = _f_stage_warnings()
  self.stage_warnings = stage_warnings
  self.tasks = tasks
  self.replay = replay
  if steps is MISSING: steps = _f_steps()
  self.steps = steps
  if gauges is MISSING: gauges = _f_gauges()
  self.gauges = gauges
  self.settling = settling
  self.precision = precision
  self.timeline = timeline
  if stage_totals is MISSING: stage_totals = _f_stage_totals()
  self.stage_totals = stage_totals
  if pool_totals is MISSING: pool_totals = _f_pool_totals()
  self.pool_totals = pool_totals
  if claims is MISSING: claims = _f_claims()
  self.claims = claims
CODES['def __init__(self, horizon, end, warmup, seed, events, arrivals, ended, turns, mean_live, observes=MISSING, client=MISSING, stages=MISSING, pools=MISSING, notes=MISSING, samples=MISSING, stage_warnings=MISSING, tasks=_d_tasks, replay=_d_replay, steps=MISSING, gauges=MISSING, settling=_d_settling, precision=_d_precision, timeline=_d_timeline, stage_totals=MISSING, pool_totals=MISSING, claims=MISSING):\n  self.horizon = horizon\n  self.end = end\n  self.warmup = warmup\n  self.seed = seed\n  self.events = events\n  self.arrivals = arrivals\n  self.ended = ended\n  self.turns = turns\n  self.mean_live = mean_live\n  if observes is MISSING: observes = _f_observes()\n  self.observes = observes\n  if client is MISSING: client = _f_client()\n  self.client = client\n  if stages is MISSING: stages = _f_stages()\n  self.stages = stages\n  if pools is MISSING: pools = _f_pools()\n  self.pools = pools\n  if notes is MISSING: notes = _f_notes()\n  self.notes = notes\n  if samples is MISSING: samples = _f_samples()\n  self.samples = samples\n  if stage_warnings is MISSING: stage_warnings = _f_stage_warnings()\n  self.stage_warnings = stage_warnings\n  self.tasks = tasks\n  self.replay = replay\n  if steps is MISSING: steps = _f_steps()\n  self.steps = steps\n  if gauges is MISSING: gauges = _f_gauges()\n  self.gauges = gauges\n  self.settling = settling\n  self.precision = precision\n  self.timeline = timeline\n  if stage_totals is MISSING: stage_totals = _f_stage_totals()\n  self.stage_totals = stage_totals\n  if pool_totals is MISSING: pool_totals = _f_pool_totals()\n  self.pool_totals = pool_totals\n  if claims is MISSING: claims = _f_claims()\n  self.claims = claims\n'] = __init__.__code__


def __init__(self, horizon=None, warmup=None, seed=None, arrivals=None, lines=None):
  _set(self, 'horizon', horizon)
  _set(self, 'warmup', warmup)
  _set(self, 'seed', seed)
  _set(self, 'arrivals', arrivals)
  _set(self, 'lines', lines)
CODES["def __init__(self, horizon=_d_horizon, warmup=_d_warmup, seed=_d_seed, arrivals=_d_arrivals, lines=_d_lines):\n  _set(self, 'horizon', horizon)\n  _set(self, 'warmup', warmup)\n  _set(self, 'seed', seed)\n  _set(self, 'arrivals', arrivals)\n  _set(self, 'lines', lines)\n"] = __init__.__code__


def __init__(self, id, index, span, name_span):
  _set(self, 'id', id)
  _set(self, 'index', index)
  _set(self, 'span', span)
  _set(self, 'name_span', name_span)
CODES["def __init__(self, id, index, span, name_span):\n  _set(self, 'id', id)\n  _set(self, 'index', index)\n  _set(self, 'span', span)\n  _set(self, 'name_span', name_span)\n"] = __init__.__code__


def __init__(self, id, pools, body, reuse=None, cache=None, lease=None, label=None, prefix=None):
  _set(self, 'id', id)
  _set(self, 'pools', pools)
  _set(self, 'body', body)
  _set(self, 'reuse', reuse)
  _set(self, 'cache', cache)
  _set(self, 'lease', lease)
  _set(self, 'label', label)
  _set(self, 'prefix', prefix)
CODES["def __init__(self, id, pools, body, reuse=_d_reuse, cache=_d_cache, lease=_d_lease, label=_d_label, prefix=_d_prefix):\n  _set(self, 'id', id)\n  _set(self, 'pools', pools)\n  _set(self, 'body', body)\n  _set(self, 'reuse', reuse)\n  _set(self, 'cache', cache)\n  _set(self, 'lease', lease)\n  _set(self, 'label', label)\n  _set(self, 'prefix', prefix)\n"] = __init__.__code__


def __init__(self, id, span):
  _set(self, 'id', id)
  _set(self, 'span', span)
CODES["def __init__(self, id, span):\n  _set(self, 'id', id)\n  _set(self, 'span', span)\n"] = __init__.__code__


def __init__(self, index, name, size, span, kind=None, block=None):
  self.index = index
  self.name = name
  self.size = size
  self.span = span
  self.kind = kind
  self.block = block
CODES['def __init__(self, index, name, size, span, kind=_d_kind, block=_d_block):\n  self.index = index\n  self.name = name\n  self.size = size\n  self.span = span\n  self.kind = kind\n  self.block = block\n'] = __init__.__code__


def __init__(self, item, ordinal, assigned=None, mentions=None, sends=None):
  self.item = item
  self.ordinal = ordinal
  self.assigned = assigned
  if mentions is MISSING: mentions = _f_mentions()
  self.mentions = mentions
  self.sends = sends
CODES['def __init__(self, item, ordinal, assigned=_d_assigned, mentions=MISSING, sends=_d_sends):\n  self.item = item\n  self.ordinal = ordinal\n  self.assigned = assigned\n  if mentions is MISSING: mentions = _f_mentions()\n  self.mentions = mentions\n  self.sends = sends\n'] = __init__.__code__


def __init__(self, item, size, pools, roles, entries, locals, leases, latency=None, pulls=None, attributes=None):
  self.item = item
  self.size = size
  self.pools = pools
  self.roles = roles
  self.entries = entries
  self.locals = locals
  self.leases = leases
  self.latency = latency
  self.pulls = pulls
  self.attributes = attributes
CODES['def __init__(self, item, size, pools, roles, entries, locals, leases, latency=_d_latency, pulls=_d_pulls, attributes=_d_attributes):\n  self.item = item\n  self.size = size\n  self.pools = pools\n  self.roles = roles\n  self.entries = entries\n  self.locals = locals\n  self.leases = leases\n  self.latency = latency\n  self.pulls = pulls\n  self.attributes = attributes\n'] = __init__.__code__


def __init__(self, key, column, unit, total=None):
  _set(self, 'key', key)
  _set(self, 'column', column)
  _set(self, 'unit', unit)
  _set(self, 'total', total)
CODES["def __init__(self, key, column, unit, total=_d_total):\n  _set(self, 'key', key)\n  _set(self, 'column', column)\n  _set(self, 'unit', unit)\n  _set(self, 'total', total)\n"] = __init__.__code__


def __init__(self, key, default, span):
  _set(self, 'key', key)
  _set(self, 'default', default)
  _set(self, 'span', span)
CODES["def __init__(self, key, default, span):\n  _set(self, 'key', key)\n  _set(self, 'default', default)\n  _set(self, 'span', span)\n"] = __init__.__code__


def __init__(self, key, label, unit, signed):
  _set(self, 'key', key)
  _set(self, 'label', label)
  _set(self, 'unit', unit)
  _set(self, 'signed', signed)
CODES["def __init__(self, key, label, unit, signed):\n  _set(self, 'key', key)\n  _set(self, 'label', label)\n  _set(self, 'unit', unit)\n  _set(self, 'signed', signed)\n"] = __init__.__code__


def __init__(self, key, length, label=None):
  _set(self, 'key', key)
  _set(self, 'length', length)
  _set(self, 'label', label)
CODES["def __init__(self, key, length, label=_d_label):\n  _set(self, 'key', key)\n  _set(self, 'length', length)\n  _set(self, 'label', label)\n"] = __init__.__code__


def __init__(self, key, length, span):
  _set(self, 'key', key)
  _set(self, 'length', length)
  _set(self, 'span', span)
CODES["def __init__(self, key, length, span):\n  _set(self, 'key', key)\n  _set(self, 'length', length)\n  _set(self, 'span', span)\n"] = __init__.__code__


def __init__(self, kind, arg, span):
  _set(self, 'kind', kind)
  _set(self, 'arg', arg)
  _set(self, 'span', span)
CODES["def __init__(self, kind, arg, span):\n  _set(self, 'kind', kind)\n  _set(self, 'arg', arg)\n  _set(self, 'span', span)\n"] = __init__.__code__


def __init__(self, kind, text, start, end):
  _set(self, 'kind', kind)
  _set(self, 'text', text)
  _set(self, 'start', start)
  _set(self, 'end', end)
CODES["def __init__(self, kind, text, start, end):\n  _set(self, 'kind', kind)\n  _set(self, 'text', text)\n  _set(self, 'start', start)\n  _set(self, 'end', end)\n"] = __init__.__code__


def __init__(self, kind=None, rate=None, n=None, gap=None):
  _set(self, 'kind', kind)
  _set(self, 'rate', rate)
  _set(self, 'n', n)
  _set(self, 'gap', gap)
CODES["def __init__(self, kind=_d_kind, rate=_d_rate, n=_d_n, gap=_d_gap):\n  _set(self, 'kind', kind)\n  _set(self, 'rate', rate)\n  _set(self, 'n', n)\n  _set(self, 'gap', gap)\n"] = __init__.__code__


def __init__(self, lets, pools, stages, workload, run, init, turn, session, two_sided, gauges=None, claims=None, share=None):
  self.lets = lets
  self.pools = pools
  self.stages = stages
  self.workload = workload
  self.run = run
  self.init = init
  self.turn = turn
  self.session = session
  self.two_sided = two_sided
  if gauges is MISSING: gauges = _f_gauges()
  self.gauges = gauges
  if claims is MISSING: claims = _f_claims()
  self.claims = claims
  self.share = share
CODES['def __init__(self, lets, pools, stages, workload, run, init, turn, session, two_sided, gauges=MISSING, claims=MISSING, share=_d_share):\n  self.lets = lets\n  self.pools = pools\n  self.stages = stages\n  self.workload = workload\n  self.run = run\n  self.init = init\n  self.turn = turn\n  self.session = session\n  self.two_sided = two_sided\n  if gauges is MISSING: gauges = _f_gauges()\n  self.gauges = gauges\n  if claims is MISSING: claims = _f_claims()\n  self.claims = claims\n  self.share = share\n'] = __init__.__code__


def __init__(self, moment=None, prefix=None, const=None, draw=None, attrs=None, only=None):
  _set(self, 'moment', moment)
  _set(self, 'prefix', prefix)
  _set(self, 'const', const)
  _set(self, 'draw', draw)
  _set(self, 'attrs', attrs)
  _set(self, 'only', only)
CODES["def __init__(self, moment=_d_moment, prefix=_d_prefix, const=_d_const, draw=_d_draw, attrs=_d_attrs, only=_d_only):\n  _set(self, 'moment', moment)\n  _set(self, 'prefix', prefix)\n  _set(self, 'const', const)\n  _set(self, 'draw', draw)\n  _set(self, 'attrs', attrs)\n  _set(self, 'only', only)\n"] = __init__.__code__


def __init__(self, name):
  _set(self, 'name', name)
CODES["def __init__(self, name):\n  _set(self, 'name', name)\n"] = __init__.__code__


def __init__(self, name, args, span, name_span):
  _set(self, 'name', name)
  _set(self, 'args', args)
  _set(self, 'span', span)
  _set(self, 'name_span', name_span)
CODES["def __init__(self, name, args, span, name_span):\n  _set(self, 'name', name)\n  _set(self, 'args', args)\n  _set(self, 'span', span)\n  _set(self, 'name_span', name_span)\n"] = __init__.__code__


def __init__(self, name, count, keys, span, name_span):
  _set(self, 'name', name)
  _set(self, 'count', count)
  _set(self, 'keys', keys)
  _set(self, 'span', span)
  _set(self, 'name_span', name_span)
CODES["def __init__(self, name, count, keys, span, name_span):\n  _set(self, 'name', name)\n  _set(self, 'count', count)\n  _set(self, 'keys', keys)\n  _set(self, 'span', span)\n  _set(self, 'name_span', name_span)\n"] = __init__.__code__


def __init__(self, name, expr):
  _set(self, 'name', name)
  _set(self, 'expr', expr)
CODES["def __init__(self, name, expr):\n  _set(self, 'name', name)\n  _set(self, 'expr', expr)\n"] = __init__.__code__


def __init__(self, name, expr, span, name_span):
  _set(self, 'name', name)
  _set(self, 'expr', expr)
  _set(self, 'span', span)
  _set(self, 'name_span', name_span)
CODES["def __init__(self, name, expr, span, name_span):\n  _set(self, 'name', name)\n  _set(self, 'expr', expr)\n  _set(self, 'span', span)\n  _set(self, 'name_span', name_span)\n"] = __init__.__code__


def __init__(self, name, expr, span, name_span, choices=None, choice_spans=None):
  _set(self, 'name', name)
  _set(self, 'expr', expr)
  _set(self, 'span', span)
  _set(self, 'name_span', name_span)
  _set(self, 'choices', choices)
  _set(self, 'choice_spans', choice_spans)
CODES["def __init__(self, name, expr, span, name_span, choices=_d_choices, choice_spans=_d_choice_spans):\n  _set(self, 'name', name)\n  _set(self, 'expr', expr)\n  _set(self, 'span', span)\n  _set(self, 'name_span', name_span)\n  _set(self, 'choices', choices)\n  _set(self, 'choice_spans', choice_spans)\n"] = __init__.__code__


def __init__(self, name, index, mean_number, utilization, completed, throughput, mean_wait, mean_service, iterations=None, prefill_only=None, decode_only=None, mixed=None, mean_decodes=None, mean_decode_batch=None, mean_decode_step=None, mean_itl=None, itl_p50=None, itl_p99=None):
  self.name = name
  self.index = index
  self.mean_number = mean_number
  self.utilization = utilization
  self.completed = completed
  self.throughput = throughput
  self.mean_wait = mean_wait
  self.mean_service = mean_service
  self.iterations = iterations
  self.prefill_only = prefill_only
  self.decode_only = decode_only
  self.mixed = mixed
  self.mean_decodes = mean_decodes
  self.mean_decode_batch = mean_decode_batch
  self.mean_decode_step = mean_decode_step
  self.mean_itl = mean_itl
  self.itl_p50 = itl_p50
  self.itl_p99 = itl_p99
CODES['def __init__(self, name, index, mean_number, utilization, completed, throughput, mean_wait, mean_service, iterations=_d_iterations, prefill_only=_d_prefill_only, decode_only=_d_decode_only, mixed=_d_mixed, mean_decodes=_d_mean_decodes, mean_decode_batch=_d_mean_decode_batch, mean_decode_step=_d_mean_decode_step, mean_itl=_d_mean_itl, itl_p50=_d_itl_p50, itl_p99=_d_itl_p99):\n  self.name = name\n  self.index = index\n  self.mean_number = mean_number\n  self.utilization = utilization\n  self.completed = completed\n  self.throughput = throughput\n  self.mean_wait = mean_wait\n  self.mean_service = mean_service\n  self.iterations = iterations\n  self.prefill_only = prefill_only\n  self.decode_only = decode_only\n  self.mixed = mixed\n  self.mean_decodes = mean_decodes\n  self.mean_decode_batch = mean_decode_batch\n  self.mean_decode_step = mean_decode_step\n  self.mean_itl = mean_itl\n  self.itl_p50 = itl_p50\n  self.itl_p99 = itl_p99\n'] = __init__.__code__


def __init__(self, name, index, mean_used, mean_cached, mean_queue, mean_holders, mean_wait, admissions, evicted_entries, evicted_units, preemptions, spills, rejected, stuck):
  self.name = name
  self.index = index
  self.mean_used = mean_used
  self.mean_cached = mean_cached
  self.mean_queue = mean_queue
  self.mean_holders = mean_holders
  self.mean_wait = mean_wait
  self.admissions = admissions
  self.evicted_entries = evicted_entries
  self.evicted_units = evicted_units
  self.preemptions = preemptions
  self.spills = spills
  self.rejected = rejected
  self.stuck = stuck
CODES['def __init__(self, name, index, mean_used, mean_cached, mean_queue, mean_holders, mean_wait, admissions, evicted_entries, evicted_units, preemptions, spills, rejected, stuck):\n  self.name = name\n  self.index = index\n  self.mean_used = mean_used\n  self.mean_cached = mean_cached\n  self.mean_queue = mean_queue\n  self.mean_holders = mean_holders\n  self.mean_wait = mean_wait\n  self.admissions = admissions\n  self.evicted_entries = evicted_entries\n  self.evicted_units = evicted_units\n  self.preemptions = preemptions\n  self.spills = spills\n  self.rejected = rejected\n  self.stuck = stuck\n'] = __init__.__code__


def __init__(self, name, index, span, name_span):
  _set(self, 'name', name)
  _set(self, 'index', index)
  _set(self, 'span', span)
  _set(self, 'name_span', name_span)
CODES["def __init__(self, name, index, span, name_span):\n  _set(self, 'name', name)\n  _set(self, 'index', index)\n  _set(self, 'span', span)\n  _set(self, 'name_span', name_span)\n"] = __init__.__code__


def __init__(self, name, is_test=None):
  _set(self, 'name', name)
  _set(self, 'is_test', is_test)
CODES["def __init__(self, name, is_test=_d_is_test):\n  _set(self, 'name', name)\n  _set(self, 'is_test', is_test)\n"] = __init__.__code__


def __init__(self, name, kind, decides, keeps_runs, may_be_pure, guard):
  _set(self, 'name', name)
  _set(self, 'kind', kind)
  _set(self, 'decides', decides)
  _set(self, 'keeps_runs', keeps_runs)
  _set(self, 'may_be_pure', may_be_pure)
  _set(self, 'guard', guard)
CODES["def __init__(self, name, kind, decides, keeps_runs, may_be_pure, guard):\n  _set(self, 'name', name)\n  _set(self, 'kind', kind)\n  _set(self, 'decides', decides)\n  _set(self, 'keeps_runs', keeps_runs)\n  _set(self, 'may_be_pure', may_be_pure)\n  _set(self, 'guard', guard)\n"] = __init__.__code__


def __init__(self, name, kind, expr, given, stage, stage_index, span, name_span, stage_span=None):
  _set(self, 'name', name)
  _set(self, 'kind', kind)
  _set(self, 'expr', expr)
  _set(self, 'given', given)
  _set(self, 'stage', stage)
  _set(self, 'stage_index', stage_index)
  _set(self, 'span', span)
  _set(self, 'name_span', name_span)
  _set(self, 'stage_span', stage_span)
CODES["def __init__(self, name, kind, expr, given, stage, stage_index, span, name_span, stage_span=_d_stage_span):\n  _set(self, 'name', name)\n  _set(self, 'kind', kind)\n  _set(self, 'expr', expr)\n  _set(self, 'given', given)\n  _set(self, 'stage', stage)\n  _set(self, 'stage_index', stage_index)\n  _set(self, 'span', span)\n  _set(self, 'name_span', name_span)\n  _set(self, 'stage_span', stage_span)\n"] = __init__.__code__


def __init__(self, name, kind, expr, given=None, stage=None, site=None):
  _set(self, 'name', name)
  _set(self, 'kind', kind)
  _set(self, 'expr', expr)
  _set(self, 'given', given)
  _set(self, 'stage', stage)
  _set(self, 'site', site)
CODES["def __init__(self, name, kind, expr, given=_d_given, stage=_d_stage, site=_d_site):\n  _set(self, 'name', name)\n  _set(self, 'kind', kind)\n  _set(self, 'expr', expr)\n  _set(self, 'given', given)\n  _set(self, 'stage', stage)\n  _set(self, 'site', site)\n"] = __init__.__code__


def __init__(self, name, kind, size=None, servers=None, phi=None, step=None, sites=None):
  _set(self, 'name', name)
  _set(self, 'kind', kind)
  _set(self, 'size', size)
  _set(self, 'servers', servers)
  _set(self, 'phi', phi)
  _set(self, 'step', step)
  if sites is MISSING: sites = _f_sites()
  _set(self, 'sites', sites)
CODES["def __init__(self, name, kind, size=_d_size, servers=_d_servers, phi=_d_phi, step=_d_step, sites=MISSING):\n  _set(self, 'name', name)\n  _set(self, 'kind', kind)\n  _set(self, 'size', size)\n  _set(self, 'servers', servers)\n  _set(self, 'phi', phi)\n  _set(self, 'step', step)\n  if sites is MISSING: sites = _f_sites()\n  _set(self, 'sites', sites)\n"] = __init__.__code__


def __init__(self, name, kind, stage, result, first=None, checked=None, note=None):
  self.name = name
  self.kind = kind
  self.stage = stage
  self.result = result
  self.first = first
  self.checked = checked
  self.note = note
CODES['def __init__(self, name, kind, stage, result, first=_d_first, checked=_d_checked, note=_d_note):\n  self.name = name\n  self.kind = kind\n  self.stage = stage\n  self.result = result\n  self.first = first\n  self.checked = checked\n  self.note = note\n'] = __init__.__code__


def __init__(self, name, mean, ci, min, max, points=None):
  _set(self, 'name', name)
  _set(self, 'mean', mean)
  _set(self, 'ci', ci)
  _set(self, 'min', min)
  _set(self, 'max', max)
  _set(self, 'points', points)
CODES["def __init__(self, name, mean, ci, min, max, points=_d_points):\n  _set(self, 'name', name)\n  _set(self, 'mean', mean)\n  _set(self, 'ci', ci)\n  _set(self, 'min', min)\n  _set(self, 'max', max)\n  _set(self, 'points', points)\n"] = __init__.__code__


def __init__(self, name, params, param_spans, body, is_expr, span, name_span):
  _set(self, 'name', name)
  _set(self, 'params', params)
  _set(self, 'param_spans', param_spans)
  _set(self, 'body', body)
  _set(self, 'is_expr', is_expr)
  _set(self, 'span', span)
  _set(self, 'name_span', name_span)
CODES["def __init__(self, name, params, param_spans, body, is_expr, span, name_span):\n  _set(self, 'name', name)\n  _set(self, 'params', params)\n  _set(self, 'param_spans', param_spans)\n  _set(self, 'body', body)\n  _set(self, 'is_expr', is_expr)\n  _set(self, 'span', span)\n  _set(self, 'name_span', name_span)\n"] = __init__.__code__


def __init__(self, name, size, clauses, span, name_span):
  _set(self, 'name', name)
  _set(self, 'size', size)
  _set(self, 'clauses', clauses)
  _set(self, 'span', span)
  _set(self, 'name_span', name_span)
CODES["def __init__(self, name, size, clauses, span, name_span):\n  _set(self, 'name', name)\n  _set(self, 'size', size)\n  _set(self, 'clauses', clauses)\n  _set(self, 'span', span)\n  _set(self, 'name_span', name_span)\n"] = __init__.__code__


def __init__(self, name, size, family, roles, pools, serve, latency, nic, entries, span, name_span):
  _set(self, 'name', name)
  _set(self, 'size', size)
  _set(self, 'family', family)
  _set(self, 'roles', roles)
  _set(self, 'pools', pools)
  _set(self, 'serve', serve)
  _set(self, 'latency', latency)
  _set(self, 'nic', nic)
  _set(self, 'entries', entries)
  _set(self, 'span', span)
  _set(self, 'name_span', name_span)
CODES["def __init__(self, name, size, family, roles, pools, serve, latency, nic, entries, span, name_span):\n  _set(self, 'name', name)\n  _set(self, 'size', size)\n  _set(self, 'family', family)\n  _set(self, 'roles', roles)\n  _set(self, 'pools', pools)\n  _set(self, 'serve', serve)\n  _set(self, 'latency', latency)\n  _set(self, 'nic', nic)\n  _set(self, 'entries', entries)\n  _set(self, 'span', span)\n  _set(self, 'name_span', name_span)\n"] = __init__.__code__


def __init__(self, name, size, kind, arg, clauses, span, name_span):
  _set(self, 'name', name)
  _set(self, 'size', size)
  _set(self, 'kind', kind)
  _set(self, 'arg', arg)
  _set(self, 'clauses', clauses)
  _set(self, 'span', span)
  _set(self, 'name_span', name_span)
CODES["def __init__(self, name, size, kind, arg, clauses, span, name_span):\n  _set(self, 'name', name)\n  _set(self, 'size', size)\n  _set(self, 'kind', kind)\n  _set(self, 'arg', arg)\n  _set(self, 'clauses', clauses)\n  _set(self, 'span', span)\n  _set(self, 'name_span', name_span)\n"] = __init__.__code__


def __init__(self, name, size=None, cap=None, block=None, evict=None, preempt=None, queue=None, admit_via=None, spill=None):
  _set(self, 'name', name)
  _set(self, 'size', size)
  _set(self, 'cap', cap)
  _set(self, 'block', block)
  _set(self, 'evict', evict)
  _set(self, 'preempt', preempt)
  _set(self, 'queue', queue)
  _set(self, 'admit_via', admit_via)
  _set(self, 'spill', spill)
CODES["def __init__(self, name, size=_d_size, cap=_d_cap, block=_d_block, evict=_d_evict, preempt=_d_preempt, queue=_d_queue, admit_via=_d_admit_via, spill=_d_spill):\n  _set(self, 'name', name)\n  _set(self, 'size', size)\n  _set(self, 'cap', cap)\n  _set(self, 'block', block)\n  _set(self, 'evict', evict)\n  _set(self, 'preempt', preempt)\n  _set(self, 'queue', queue)\n  _set(self, 'admit_via', admit_via)\n  _set(self, 'spill', spill)\n"] = __init__.__code__


def __init__(self, name, span, head):
  _set(self, 'name', name)
  _set(self, 'span', span)
  _set(self, 'head', head)
CODES["def __init__(self, name, span, head):\n  _set(self, 'name', name)\n  _set(self, 'span', span)\n  _set(self, 'head', head)\n"] = __init__.__code__


def __init__(self, name, span, head, name_span):
  _set(self, 'name', name)
  _set(self, 'span', span)
  _set(self, 'head', head)
  _set(self, 'name_span', name_span)
CODES["def __init__(self, name, span, head, name_span):\n  _set(self, 'name', name)\n  _set(self, 'span', span)\n  _set(self, 'head', head)\n  _set(self, 'name_span', name_span)\n"] = __init__.__code__


def __init__(self, name, span, name_span, called):
  _set(self, 'name', name)
  _set(self, 'span', span)
  _set(self, 'name_span', name_span)
  _set(self, 'called', called)
CODES["def __init__(self, name, span, name_span, called):\n  _set(self, 'name', name)\n  _set(self, 'span', span)\n  _set(self, 'name_span', name_span)\n  _set(self, 'called', called)\n"] = __init__.__code__


def __init__(self, obs, expr):
  _set(self, 'obs', obs)
  _set(self, 'expr', expr)
CODES["def __init__(self, obs, expr):\n  _set(self, 'obs', obs)\n  _set(self, 'expr', expr)\n"] = __init__.__code__


def __init__(self, op, a, b):
  _set(self, 'op', op)
  _set(self, 'a', a)
  _set(self, 'b', b)
CODES["def __init__(self, op, a, b):\n  _set(self, 'op', op)\n  _set(self, 'a', a)\n  _set(self, 'b', b)\n"] = __init__.__code__


def __init__(self, op, a, b, span):
  _set(self, 'op', op)
  _set(self, 'a', a)
  _set(self, 'b', b)
  _set(self, 'span', span)
CODES["def __init__(self, op, a, b, span):\n  _set(self, 'op', op)\n  _set(self, 'a', a)\n  _set(self, 'b', b)\n  _set(self, 'span', span)\n"] = __init__.__code__


def __init__(self, op, var, count, body, span, var_span):
  _set(self, 'op', op)
  _set(self, 'var', var)
  _set(self, 'count', count)
  _set(self, 'body', body)
  _set(self, 'span', span)
  _set(self, 'var_span', var_span)
CODES["def __init__(self, op, var, count, body, span, var_span):\n  _set(self, 'op', op)\n  _set(self, 'var', var)\n  _set(self, 'count', count)\n  _set(self, 'body', body)\n  _set(self, 'span', span)\n  _set(self, 'var_span', var_span)\n"] = __init__.__code__


def __init__(self, op, x):
  _set(self, 'op', op)
  _set(self, 'x', x)
CODES["def __init__(self, op, x):\n  _set(self, 'op', op)\n  _set(self, 'x', x)\n"] = __init__.__code__


def __init__(self, op, x, span):
  _set(self, 'op', op)
  _set(self, 'x', x)
  _set(self, 'span', span)
CODES["def __init__(self, op, x, span):\n  _set(self, 'op', op)\n  _set(self, 'x', x)\n  _set(self, 'span', span)\n"] = __init__.__code__


def __init__(self, path, ordered, span):
  _set(self, 'path', path)
  _set(self, 'ordered', ordered)
  _set(self, 'span', span)
CODES["def __init__(self, path, ordered, span):\n  _set(self, 'path', path)\n  _set(self, 'ordered', ordered)\n  _set(self, 'span', span)\n"] = __init__.__code__


def __init__(self, path, ordered=None):
  _set(self, 'path', path)
  _set(self, 'ordered', ordered)
CODES["def __init__(self, path, ordered=_d_ordered):\n  _set(self, 'path', path)\n  _set(self, 'ordered', ordered)\n"] = __init__.__code__


def __init__(self, path, span, path_span):
  _set(self, 'path', path)
  _set(self, 'span', span)
  _set(self, 'path_span', path_span)
CODES["def __init__(self, path, span, path_span):\n  _set(self, 'path', path)\n  _set(self, 'span', span)\n  _set(self, 'path_span', path_span)\n"] = __init__.__code__


def __init__(self, policy, span):
  _set(self, 'policy', policy)
  _set(self, 'span', span)
CODES["def __init__(self, policy, span):\n  _set(self, 'policy', policy)\n  _set(self, 'span', span)\n"] = __init__.__code__


def __init__(self, pool, index=None):
  _set(self, 'pool', pool)
  _set(self, 'index', index)
CODES["def __init__(self, pool, index=_d_index):\n  _set(self, 'pool', pool)\n  _set(self, 'index', index)\n"] = __init__.__code__


def __init__(self, pools, reuse, bindings, body, cache, span, head, prefix=None, lease=None):
  _set(self, 'pools', pools)
  _set(self, 'reuse', reuse)
  _set(self, 'bindings', bindings)
  _set(self, 'body', body)
  _set(self, 'cache', cache)
  _set(self, 'span', span)
  _set(self, 'head', head)
  _set(self, 'prefix', prefix)
  _set(self, 'lease', lease)
CODES["def __init__(self, pools, reuse, bindings, body, cache, span, head, prefix=_d_prefix, lease=_d_lease):\n  _set(self, 'pools', pools)\n  _set(self, 'reuse', reuse)\n  _set(self, 'bindings', bindings)\n  _set(self, 'body', body)\n  _set(self, 'cache', cache)\n  _set(self, 'span', span)\n  _set(self, 'head', head)\n  _set(self, 'prefix', prefix)\n  _set(self, 'lease', lease)\n"] = __init__.__code__


def __init__(self, pools, stages, attributes, observes, session, init=None, turn=None, arrival=None, trace=None, hidden=None, run=None, constants=None, two_sided=None, path=None, block_count=None, handles=None, gauges=None, share=None, shared=None, estimated=None, claims=None):
  _set(self, 'pools', pools)
  _set(self, 'stages', stages)
  _set(self, 'attributes', attributes)
  _set(self, 'observes', observes)
  _set(self, 'session', session)
  _set(self, 'init', init)
  _set(self, 'turn', turn)
  _set(self, 'arrival', arrival)
  _set(self, 'trace', trace)
  _set(self, 'hidden', hidden)
  _set(self, 'run', run)
  if constants is MISSING: constants = _f_constants()
  _set(self, 'constants', constants)
  _set(self, 'two_sided', two_sided)
  _set(self, 'path', path)
  _set(self, 'block_count', block_count)
  _set(self, 'handles', handles)
  _set(self, 'gauges', gauges)
  _set(self, 'share', share)
  _set(self, 'shared', shared)
  _set(self, 'estimated', estimated)
  _set(self, 'claims', claims)
CODES["def __init__(self, pools, stages, attributes, observes, session, init=_d_init, turn=_d_turn, arrival=_d_arrival, trace=_d_trace, hidden=_d_hidden, run=_d_run, constants=MISSING, two_sided=_d_two_sided, path=_d_path, block_count=_d_block_count, handles=_d_handles, gauges=_d_gauges, share=_d_share, shared=_d_shared, estimated=_d_estimated, claims=_d_claims):\n  _set(self, 'pools', pools)\n  _set(self, 'stages', stages)\n  _set(self, 'attributes', attributes)\n  _set(self, 'observes', observes)\n  _set(self, 'session', session)\n  _set(self, 'init', init)\n  _set(self, 'turn', turn)\n  _set(self, 'arrival', arrival)\n  _set(self, 'trace', trace)\n  _set(self, 'hidden', hidden)\n  _set(self, 'run', run)\n  if constants is MISSING: constants = _f_constants()\n  _set(self, 'constants', constants)\n  _set(self, 'two_sided', two_sided)\n  _set(self, 'path', path)\n  _set(self, 'block_count', block_count)\n  _set(self, 'handles', handles)\n  _set(self, 'gauges', gauges)\n  _set(self, 'share', share)\n  _set(self, 'shared', shared)\n  _set(self, 'estimated', estimated)\n  _set(self, 'claims', claims)\n"] = __init__.__code__


def __init__(self, pred, order):
  _set(self, 'pred', pred)
  _set(self, 'order', order)
CODES["def __init__(self, pred, order):\n  _set(self, 'pred', pred)\n  _set(self, 'order', order)\n"] = __init__.__code__


def __init__(self, prefix, holds=None):
  _set(self, 'prefix', prefix)
  _set(self, 'holds', holds)
CODES["def __init__(self, prefix, holds=_d_holds):\n  _set(self, 'prefix', prefix)\n  _set(self, 'holds', holds)\n"] = __init__.__code__


def __init__(self, queue, index, verb, args, source, to, to_n, span, head, source_field=None):
  _set(self, 'queue', queue)
  _set(self, 'index', index)
  _set(self, 'verb', verb)
  _set(self, 'args', args)
  _set(self, 'source', source)
  _set(self, 'to', to)
  _set(self, 'to_n', to_n)
  _set(self, 'span', span)
  _set(self, 'head', head)
  _set(self, 'source_field', source_field)
CODES["def __init__(self, queue, index, verb, args, source, to, to_n, span, head, source_field=_d_source_field):\n  _set(self, 'queue', queue)\n  _set(self, 'index', index)\n  _set(self, 'verb', verb)\n  _set(self, 'args', args)\n  _set(self, 'source', source)\n  _set(self, 'to', to)\n  _set(self, 'to_n', to_n)\n  _set(self, 'span', span)\n  _set(self, 'head', head)\n  _set(self, 'source_field', source_field)\n"] = __init__.__code__


def __init__(self, queues=None):
  if queues is MISSING: queues = _f_queues()
  self.queues = queues
CODES['def __init__(self, queues=MISSING):\n  if queues is MISSING: queues = _f_queues()\n  self.queues = queues\n'] = __init__.__code__


def __init__(self, reader, source, latency, share, span, reader_span, source_span):
  _set(self, 'reader', reader)
  _set(self, 'source', source)
  _set(self, 'latency', latency)
  _set(self, 'share', share)
  _set(self, 'span', span)
  _set(self, 'reader_span', reader_span)
  _set(self, 'source_span', source_span)
CODES["def __init__(self, reader, source, latency, share, span, reader_span, source_span):\n  _set(self, 'reader', reader)\n  _set(self, 'source', source)\n  _set(self, 'latency', latency)\n  _set(self, 'share', share)\n  _set(self, 'span', span)\n  _set(self, 'reader_span', reader_span)\n  _set(self, 'source_span', source_span)\n"] = __init__.__code__


def __init__(self, ref):
  _set(self, 'ref', ref)
CODES["def __init__(self, ref):\n  _set(self, 'ref', ref)\n"] = __init__.__code__


def __init__(self, ref, amount, label=None):
  _set(self, 'ref', ref)
  _set(self, 'amount', amount)
  _set(self, 'label', label)
CODES["def __init__(self, ref, amount, label=_d_label):\n  _set(self, 'ref', ref)\n  _set(self, 'amount', amount)\n  _set(self, 'label', label)\n"] = __init__.__code__


def __init__(self, ref, amount, span, head):
  _set(self, 'ref', ref)
  _set(self, 'amount', amount)
  _set(self, 'span', span)
  _set(self, 'head', head)
CODES["def __init__(self, ref, amount, span, head):\n  _set(self, 'ref', ref)\n  _set(self, 'amount', amount)\n  _set(self, 'span', span)\n  _set(self, 'head', head)\n"] = __init__.__code__


def __init__(self, ref, mode, work, growing, span, head, form=None, also=None):
  _set(self, 'ref', ref)
  _set(self, 'mode', mode)
  _set(self, 'work', work)
  _set(self, 'growing', growing)
  _set(self, 'span', span)
  _set(self, 'head', head)
  _set(self, 'form', form)
  _set(self, 'also', also)
CODES["def __init__(self, ref, mode, work, growing, span, head, form=_d_form, also=_d_also):\n  _set(self, 'ref', ref)\n  _set(self, 'mode', mode)\n  _set(self, 'work', work)\n  _set(self, 'growing', growing)\n  _set(self, 'span', span)\n  _set(self, 'head', head)\n  _set(self, 'form', form)\n  _set(self, 'also', also)\n"] = __init__.__code__


def __init__(self, ref, span):
  _set(self, 'ref', ref)
  _set(self, 'span', span)
CODES["def __init__(self, ref, span):\n  _set(self, 'ref', ref)\n  _set(self, 'span', span)\n"] = __init__.__code__


def __init__(self, ref, span, head):
  _set(self, 'ref', ref)
  _set(self, 'span', span)
  _set(self, 'head', head)
CODES["def __init__(self, ref, span, head):\n  _set(self, 'ref', ref)\n  _set(self, 'span', span)\n  _set(self, 'head', head)\n"] = __init__.__code__


def __init__(self, ref, time, label=None):
  _set(self, 'ref', ref)
  _set(self, 'time', time)
  _set(self, 'label', label)
CODES["def __init__(self, ref, time, label=_d_label):\n  _set(self, 'ref', ref)\n  _set(self, 'time', time)\n  _set(self, 'label', label)\n"] = __init__.__code__


def __init__(self, ref, time, span):
  _set(self, 'ref', ref)
  _set(self, 'time', time)
  _set(self, 'span', span)
CODES["def __init__(self, ref, time, span):\n  _set(self, 'ref', ref)\n  _set(self, 'time', time)\n  _set(self, 'span', span)\n"] = __init__.__code__


def __init__(self, ref, units, reserve, span):
  _set(self, 'ref', ref)
  _set(self, 'units', units)
  _set(self, 'reserve', reserve)
  _set(self, 'span', span)
CODES["def __init__(self, ref, units, reserve, span):\n  _set(self, 'ref', ref)\n  _set(self, 'units', units)\n  _set(self, 'reserve', reserve)\n  _set(self, 'span', span)\n"] = __init__.__code__


def __init__(self, ref, units, reserve=None, label=None, reserve_label=None):
  _set(self, 'ref', ref)
  _set(self, 'units', units)
  _set(self, 'reserve', reserve)
  _set(self, 'label', label)
  _set(self, 'reserve_label', reserve_label)
CODES["def __init__(self, ref, units, reserve=_d_reserve, label=_d_label, reserve_label=_d_reserve_label):\n  _set(self, 'ref', ref)\n  _set(self, 'units', units)\n  _set(self, 'reserve', reserve)\n  _set(self, 'label', label)\n  _set(self, 'reserve_label', reserve_label)\n"] = __init__.__code__


def __init__(self, role, index, on, work, growing, span, head, also=None, src=None, dst=None, n=None):
  _set(self, 'role', role)
  _set(self, 'index', index)
  _set(self, 'on', on)
  _set(self, 'work', work)
  _set(self, 'growing', growing)
  _set(self, 'span', span)
  _set(self, 'head', head)
  _set(self, 'also', also)
  _set(self, 'src', src)
  _set(self, 'dst', dst)
  _set(self, 'n', n)
CODES["def __init__(self, role, index, on, work, growing, span, head, also=_d_also, src=_d_src, dst=_d_dst, n=_d_n):\n  _set(self, 'role', role)\n  _set(self, 'index', index)\n  _set(self, 'on', on)\n  _set(self, 'work', work)\n  _set(self, 'growing', growing)\n  _set(self, 'span', span)\n  _set(self, 'head', head)\n  _set(self, 'also', also)\n  _set(self, 'src', src)\n  _set(self, 'dst', dst)\n  _set(self, 'n', n)\n"] = __init__.__code__


def __init__(self, settled, reasons, warmup, horizon, evidence=None):
  self.settled = settled
  self.reasons = reasons
  self.warmup = warmup
  self.horizon = horizon
  if evidence is MISSING: evidence = _f_evidence()
  self.evidence = evidence
CODES['def __init__(self, settled, reasons, warmup, horizon, evidence=MISSING):\n  self.settled = settled\n  self.reasons = reasons\n  self.warmup = warmup\n  self.horizon = horizon\n  if evidence is MISSING: evidence = _f_evidence()\n  self.evidence = evidence\n'] = __init__.__code__


def __init__(self, slot, count, keys, label=None):
  _set(self, 'slot', slot)
  _set(self, 'count', count)
  _set(self, 'keys', keys)
  _set(self, 'label', label)
CODES["def __init__(self, slot, count, keys, label=_d_label):\n  _set(self, 'slot', slot)\n  _set(self, 'count', count)\n  _set(self, 'keys', keys)\n  _set(self, 'label', label)\n"] = __init__.__code__


def __init__(self, slot, expr):
  _set(self, 'slot', slot)
  _set(self, 'expr', expr)
CODES["def __init__(self, slot, expr):\n  _set(self, 'slot', slot)\n  _set(self, 'expr', expr)\n"] = __init__.__code__


def __init__(self, slot, name):
  _set(self, 'slot', slot)
  _set(self, 'name', name)
CODES["def __init__(self, slot, name):\n  _set(self, 'slot', slot)\n  _set(self, 'name', name)\n"] = __init__.__code__


def __init__(self, source, start, end):
  _set(self, 'source', source)
  _set(self, 'start', start)
  _set(self, 'end', end)
CODES["def __init__(self, source, start, end):\n  _set(self, 'source', source)\n  _set(self, 'start', start)\n  _set(self, 'end', end)\n"] = __init__.__code__


def __init__(self, source, start, end, via=None):
  _set(self, 'source', source)
  _set(self, 'start', start)
  _set(self, 'end', end)
  _set(self, 'via', via)
CODES["def __init__(self, source, start, end, via=_d_via):\n  _set(self, 'source', source)\n  _set(self, 'start', start)\n  _set(self, 'end', end)\n  _set(self, 'via', via)\n"] = __init__.__code__


def __init__(self, span):
  _set(self, 'span', span)
CODES["def __init__(self, span):\n  _set(self, 'span', span)\n"] = __init__.__code__


def __init__(self, span, queue=None, queue_span=None):
  _set(self, 'span', span)
  _set(self, 'queue', queue)
  _set(self, 'queue_span', queue_span)
CODES["def __init__(self, span, queue=_d_queue, queue_span=_d_queue_span):\n  _set(self, 'span', span)\n  _set(self, 'queue', queue)\n  _set(self, 'queue_span', queue_span)\n"] = __init__.__code__


def __init__(self, stage, index=None):
  _set(self, 'stage', stage)
  _set(self, 'index', index)
CODES["def __init__(self, stage, index=_d_index):\n  _set(self, 'stage', stage)\n  _set(self, 'index', index)\n"] = __init__.__code__


def __init__(self, stage, work, mode=None, growing=None, label=None, also=None):
  _set(self, 'stage', stage)
  _set(self, 'work', work)
  _set(self, 'mode', mode)
  _set(self, 'growing', growing)
  _set(self, 'label', label)
  _set(self, 'also', also)
CODES["def __init__(self, stage, work, mode=_d_mode, growing=_d_growing, label=_d_label, also=_d_also):\n  _set(self, 'stage', stage)\n  _set(self, 'work', work)\n  _set(self, 'mode', mode)\n  _set(self, 'growing', growing)\n  _set(self, 'label', label)\n  _set(self, 'also', also)\n"] = __init__.__code__


def __init__(self, station, entry, index, source_pool=None, source_station=None, source_index=None):
  _set(self, 'station', station)
  _set(self, 'entry', entry)
  _set(self, 'index', index)
  _set(self, 'source_pool', source_pool)
  _set(self, 'source_station', source_station)
  _set(self, 'source_index', source_index)
CODES["def __init__(self, station, entry, index, source_pool=_d_source_pool, source_station=_d_source_station, source_index=_d_source_index):\n  _set(self, 'station', station)\n  _set(self, 'entry', entry)\n  _set(self, 'index', index)\n  _set(self, 'source_pool', source_pool)\n  _set(self, 'source_station', source_station)\n  _set(self, 'source_index', source_index)\n"] = __init__.__code__


def __init__(self, subst=None, via=None, site=None, side=None, queue=None):
  if subst is MISSING: subst = _f_subst()
  _set(self, 'subst', subst)
  _set(self, 'via', via)
  _set(self, 'site', site)
  _set(self, 'side', side)
  _set(self, 'queue', queue)
CODES["def __init__(self, subst=MISSING, via=_d_via, site=_d_site, side=_d_side, queue=_d_queue):\n  if subst is MISSING: subst = _f_subst()\n  _set(self, 'subst', subst)\n  _set(self, 'via', via)\n  _set(self, 'site', site)\n  _set(self, 'side', side)\n  _set(self, 'queue', queue)\n"] = __init__.__code__


def __init__(self, text, path=None):
  _set(self, 'text', text)
  _set(self, 'path', path)
CODES["def __init__(self, text, path=_d_path):\n  _set(self, 'text', text)\n  _set(self, 'path', path)\n"] = __init__.__code__


def __init__(self, text, span):
  _set(self, 'text', text)
  _set(self, 'span', span)
CODES["def __init__(self, text, span):\n  _set(self, 'text', text)\n  _set(self, 'span', span)\n"] = __init__.__code__


def __init__(self, tier, link, work, pred, work_site=None, pred_site=None):
  _set(self, 'tier', tier)
  _set(self, 'link', link)
  _set(self, 'work', work)
  _set(self, 'pred', pred)
  _set(self, 'work_site', work_site)
  _set(self, 'pred_site', pred_site)
CODES["def __init__(self, tier, link, work, pred, work_site=_d_work_site, pred_site=_d_pred_site):\n  _set(self, 'tier', tier)\n  _set(self, 'link', link)\n  _set(self, 'work', work)\n  _set(self, 'pred', pred)\n  _set(self, 'work_site', work_site)\n  _set(self, 'pred_site', pred_site)\n"] = __init__.__code__


def __init__(self, time, sessions, depth, open, stuck, records=None):
  self.time = time
  self.sessions = sessions
  self.depth = depth
  self.open = open
  self.stuck = stuck
  if records is MISSING: records = _f_records()
  self.records = records
CODES['def __init__(self, time, sessions, depth, open, stuck, records=MISSING):\n  self.time = time\n  self.sessions = sessions\n  self.depth = depth\n  self.open = open\n  self.stuck = stuck\n  if records is MISSING: records = _f_records()\n  self.records = records\n'] = __init__.__code__


def __init__(self, value):
  _set(self, 'value', value)
CODES["def __init__(self, value):\n  _set(self, 'value', value)\n"] = __init__.__code__


def __init__(self, value, span):
  _set(self, 'value', value)
  _set(self, 'span', span)
CODES["def __init__(self, value, span):\n  _set(self, 'value', value)\n  _set(self, 'span', span)\n"] = __init__.__code__


def __init__(self, verb, params, source, body, span, name_span):
  _set(self, 'verb', verb)
  _set(self, 'params', params)
  _set(self, 'source', source)
  _set(self, 'body', body)
  _set(self, 'span', span)
  _set(self, 'name_span', name_span)
CODES["def __init__(self, verb, params, source, body, span, name_span):\n  _set(self, 'verb', verb)\n  _set(self, 'params', params)\n  _set(self, 'source', source)\n  _set(self, 'body', body)\n  _set(self, 'span', span)\n  _set(self, 'name_span', name_span)\n"] = __init__.__code__


def __init__(self, word, value, span):
  _set(self, 'word', word)
  _set(self, 'value', value)
  _set(self, 'span', span)
CODES["def __init__(self, word, value, span):\n  _set(self, 'word', word)\n  _set(self, 'value', value)\n  _set(self, 'span', span)\n"] = __init__.__code__
