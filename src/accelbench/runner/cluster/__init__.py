"""Load from many hosts as one run: load workers as Ray actors (``accelbench run --ray``).

Nothing here imports Ray at module level except ``ray_workers``, which only the Ray
path of ``runner/benchmark.py`` imports; a run without ``--ray`` never loads Ray.
"""
