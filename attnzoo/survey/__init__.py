"""The survey: the detectors run over the attention implementations people actually use.

Each adapter in :mod:`attnzoo.survey.adapters` maps the SDPA signature onto one library's own
function (layouts, mask conventions and array types only, never its math) and declares, as
data beside it, what the library does not offer (:mod:`attnzoo.survey.capabilities`).
``attnzoo survey`` runs every installed adapter in the sandbox worker and writes
docs/survey.json and docs/survey.md.
"""
