"""What the record scripts under bench/cluster-data/ share: loading another folder's script.
The folders are named by date (2026-11-24-late), so Python cannot import them as packages.
"""
import importlib.util
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def load_script(folder, name="table.py"):
    """bench/cluster-data/FOLDER/NAME as a module."""
    module_name = f"{folder}_{name[:-3]}".replace("-", "_")
    spec = importlib.util.spec_from_file_location(module_name, os.path.join(HERE, folder, name))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
