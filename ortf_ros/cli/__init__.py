"""The console scripts: ``ortf`` (``ortf.py``) and ``ortf-bag2ortf`` (``bag2ortf.py``).

``ortf``'s subcommands: ``demo_command`` (with ``demo_shared``, the steps its live part,
``ortf_ros.ros.live_demo``, takes too), ``conversions`` (export and import). Around
them, what every command shares: ``boundary`` (one error boundary: every error the
package or the operating system raises is one line and an exit code, the README's),
``arguments`` (flags within the bounds a mapping file's keys have), ``outputs`` (what a
command writes, and removes when it fails) and ``progress``. Paths are checked by
``ortf_ros.io.paths`` before anything is written. The nodes' console scripts are
``ortf_ros.ros.entry``.
"""
