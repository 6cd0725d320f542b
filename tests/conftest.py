import pytest

from detectors.harness.battery import Battery


@pytest.fixture(scope="session")
def battery(request):
    return Battery(request.config.getoption("kill_matrix_seed"))
