"""``serq prove``: claims decided over every path of small programs, on an
exact reference semantics (:mod:`serq.prove.exact`, :mod:`serq.prove.machine`)."""
