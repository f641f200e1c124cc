"""How the package ships and installs: the wheel and sdist, package.xml, rosdep, a colcon
workspace, the launch files, Humble's rclpy API, and the import rules that keep the core ROS-free.
(Not named ``packaging``: that is a module pip and pytest import.)"""
