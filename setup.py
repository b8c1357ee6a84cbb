"""Build hook: the wheel carries the project's data inside the package as helm_nemo/data/.

charts/, generator/, schemas/, values/accelerators/, values/examples/ and CHANGELOG.md stay at the repository
root (the layout of the design card); building a wheel copies exactly those (helm_nemo.resources.DATA_ITEMS)
byte for byte, so `helm_nemo.resources` finds the same files installed as in a checkout.
"""

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
DATA_ITEMS = ("charts", "generator", "schemas", "values/accelerators", "values/examples", "CHANGELOG.md")


class BuildWithData(build_py):
    def run(self):
        super().run()
        if self.editable_mode:  # a checkout finds its data next to the package
            return
        target = Path(self.build_lib) / "helm_nemo" / "data"
        shutil.rmtree(target, ignore_errors=True)
        for item in DATA_ITEMS:
            source = ROOT / item
            if source.is_dir():
                shutil.copytree(source, target / item, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            else:
                (target / item).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(source, target / item)


setup(cmdclass={"build_py": BuildWithData})
