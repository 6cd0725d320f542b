import pytest

from detectors.kit.battery import Battery


@pytest.fixture(scope="session")
def battery(request):
    return Battery(request.config.getoption("kill_matrix_seed"))
