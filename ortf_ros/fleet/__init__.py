"""Many recordings into one dataset, as ``ortf-bag2ortf`` converts them: the inputs
(directories searched, ``--inputs-from``), what the dataset holds already (``ledger``),
one recording's conversion in a worker (``task``), the runners (``pool`` for ``--jobs``,
``ray_runner`` for ``--ray``) and the driver that imports their results in order."""
