"""``ortf doctor``: quality findings about what a dataset recorded (not its conformance to the
format, which ``ortf validate`` checks): gaps, frozen cameras, fabricated time, joints
beyond their limits, values that are not numbers, episodes too short or without an outcome.

``doctor.examine`` is the entry point; ``findings`` the catalogue of rule ids.
"""
