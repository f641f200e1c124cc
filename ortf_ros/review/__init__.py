"""``ortf review``: a local web page to go through a dataset's episodes and decide.

An optional extra (``pip install 'ortf_ros[review]'``: Starlette, uvicorn, plotly): the
rest of the package never imports this one. ``server`` runs it, ``app`` routes the
requests, and the modules beside them each do one job for the pages: ``access`` keeps
every request inside the dataset, ``catalog`` is the episode index as the pages see it,
``plots`` and ``depth`` turn an episode into what a browser can draw, ``findings`` runs
the doctor in the background, and ``pages`` writes the HTML.
"""
