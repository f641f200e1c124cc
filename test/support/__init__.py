"""What the tests share and are not tests: recordings and datasets they build, the ROS children
they start (``*_ros.py``, ``*_child.py`` scripts run by path), what a module needs (``needs.py``),
and the third-party recordings several rooms read (``resources/``)."""
