"""The console scripts: ``ortf`` (``ortf.py``) and ``ortf-bag2ortf`` (``bag2ortf.py``).

Around them, what every command shares: ``boundary`` (one error boundary: every error the
package or the operating system raises is one line and an exit code, the README's), and
``arguments`` (every flag and path checked before anything is written, with the bounds
a mapping file's keys have). The nodes' console scripts are ``ortf_ros.ros.entry``.
"""
