"""The cases a detector iterates, as the subject hands them out."""


class Cases(list):
    """The cases a detector iterates: iterating marks the current one on the subject (a
    refusal of any call derived from it sets that case aside) and tells the progress line."""

    def __init__(self, subject, items=()):
        super().__init__(items)
        self.subject = subject

    def __iter__(self):
        progress, n = self.subject.progress, len(self)
        for i, c in enumerate(super().__iter__()):
            self.subject.current = c.name
            if progress is not None:
                progress.case(i, n, c.name)
            yield c
        self.subject.current = None
        if progress is not None:
            progress.case(n, n)

    def __getitem__(self, i):
        got = super().__getitem__(i)
        return Cases(self.subject, got) if isinstance(i, slice) else got
