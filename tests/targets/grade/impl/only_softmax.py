"""A lesson module with only ``softmax`` (for tests/test_grade.py): the other functions skip."""


def softmax(x):
    return x
