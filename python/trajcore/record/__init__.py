"""Recording: the wrappers and the `Writer` that hand steps to the core's writer thread.

`env_wrapper` (`RecordEpisodes`, one gymnasium env), `vector_wrapper` (`RecordVectorEpisodes`),
`pettingzoo` (`RecordParallelEpisodes`, `RecordAECEpisodes`), `manual` (`Writer`: episodes from any
loop, without an env) all build on `session` (`Recording`: the core recorder's life cycle, custom
data, stats, close). `options` turns the recording options into the core's config; `frames` the
rendered frames; `replay` drives finished episodes (Minari, RLlib) through a wrapper.

Nothing here imports `trajcore.read`'s dataset at module level: a recorder needs a reader only to
check a directory that already holds recordings.
"""
