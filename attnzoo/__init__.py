"""attnzoo: the application that drives the zoo, the detectors and the reference.

Rooms: ``cli`` (parsing and dispatch), ``sandbox`` (loading and running code under test),
``runner`` (one detector on one subject, as a finding), ``matrix`` (the kill matrix model, its
renderers and its pytest plugin), ``report`` (what ``attnzoo check`` says), and ``devtools``
(the docs site, mutation testing, benchmarks, the GPU table: the only room that imports
matplotlib or mutmut).
"""
