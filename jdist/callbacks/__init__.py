"""Callbacks for `jdist.Trainer`: the protocol (`Callback`) and the standard ones."""
from jdist.callbacks.backup_and_restore import BackupAndRestore
from jdist.callbacks.base import Callback, CallbackList, LazyLogs
from jdist.callbacks.csv_logger import CSVLogger
from jdist.callbacks.early_stopping import EarlyStopping
from jdist.callbacks.history import History
from jdist.callbacks.metrics_logger import MetricsLogger
from jdist.callbacks.model_checkpoint import ModelCheckpoint
from jdist.callbacks.plot import PlotHistory, plot_history
from jdist.callbacks.profiler import ProfilerCallback
from jdist.callbacks.progress import ProgressBar
from jdist.callbacks.tensorboard import TensorBoard

__all__ = [
    "BackupAndRestore",
    "CSVLogger",
    "Callback",
    "CallbackList",
    "EarlyStopping",
    "History",
    "LazyLogs",
    "MetricsLogger",
    "ModelCheckpoint",
    "PlotHistory",
    "ProfilerCallback",
    "ProgressBar",
    "TensorBoard",
    "plot_history",
]
