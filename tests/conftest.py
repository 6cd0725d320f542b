import pytest

from detectors.kit.battery import Battery


@pytest.fixture(scope="session")
def battery(request):
    config = request.config
    return Battery(config.getoption("kill_matrix_seed"),
                   depth=config.getoption("kill_matrix_depth"))
