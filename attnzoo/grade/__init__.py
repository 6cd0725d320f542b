"""``attnzoo grade PATH``: test the tests — a plain pytest suite against the zoo.

The user's tests take the implementation under test as a fixture (``attention`` for the lesson
contract, ``sdpa`` for F.scaled_dot_product_attention's signature); attnzoo runs them on the
reference, every decoy and every bug of that contract, each in its own time-limited process,
and says which bugs they catch, which survive, and whether any correct implementation fails
(a false alarm). ``fixtures`` is the plugin inside those processes, ``run`` starts and watches
them, ``model`` builds the grade, ``render`` prints it, ``command`` is the command line's half.
"""
