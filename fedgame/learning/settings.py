"""Local-training settings shared by the scenario schema and the batched learner."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat, PositiveInt, field_validator

#: the most threads ``training.threads`` may ask for
MAX_THREADS = 1024


class TrainingSettings(BaseModel):
    """How each selected client trains locally in a round.

    ``mode="local_sgd"``: ``local_steps`` minibatch SGD steps of ``batch_size`` samples drawn by
    cycling through a per-round shuffle of the client's data. ``mode="fedsgd"``: one gradient
    step on the client's full local data. Learning rate ``lr_t = lr / (1 + t / lr_decay_tau)``
    at round ``t`` (constant when ``lr_decay_tau`` is unset). ``per_sample_clip`` clips every
    per-sample gradient to that ``clip_norm`` before averaging (needed by DP-SGD style noise).
    ``server_lr`` and ``server_momentum`` act on the server's step from the aggregate.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["local_sgd", "fedsgd"] = Field(
        default="local_sgd",
        description="local_sgd (local_steps minibatch steps) or fedsgd (one gradient step on "
        "the client's whole local data)",
    )
    local_steps: PositiveInt = Field(
        default=5, description="minibatch SGD steps per round (local_sgd)"
    )
    batch_size: PositiveInt = Field(default=32, description="samples per minibatch (local_sgd)")
    lr: PositiveFloat = Field(default=0.05, description="local learning rate (lr_0)")
    lr_decay_tau: PositiveFloat | None = Field(
        default=None,
        description="lr_t = lr / (1 + t / lr_decay_tau) at round t (unset: constant lr)",
    )
    weight_decay: float = Field(
        default=0.0,
        ge=0.0,
        description="L2 weight decay λ: each local step adds λ·θ to the gradient",
    )
    per_sample_clip: PositiveFloat | None = Field(
        default=None,
        description="clip every per-sample gradient to this norm before averaging (DP-SGD "
        "style; unset: no clipping)",
    )
    clip_norm: Literal["l2", "l1"] = Field(default="l2", description="the norm of per_sample_clip")
    server_lr: PositiveFloat = Field(
        default=1.0, description="step size of the server's update from the aggregate"
    )
    server_momentum: float = Field(
        default=0.0,
        ge=0.0,
        lt=1.0,
        description="server momentum beta in [0, 1) (FedAvgM): v <- beta v + mean update, "
        "theta <- theta + server_lr v; it acts on the released aggregate only, so it costs no "
        "privacy; 0 is plain FedAvg",
    )
    device: str = Field(
        default="auto",
        pattern=r"^(auto|cpu|cuda(:[0-9]{1,2})?)$",
        description="where the run trains: cpu, cuda (the current GPU), cuda:N (GPU N) or "
        "auto (cuda when a GPU is visible, else cpu); the manifest records the device used",
    )
    #: test samples per chunk when evaluating the global model each round: loss and correct
    #: predictions are summed chunk by chunk (one chunk for the embedded datasets' test sets;
    #: lower it when a large model runs out of memory). On the CPU a model with hidden layers
    #: runs each chunk in forward passes of about 1024 samples, which changes no result
    #: (:func:`fedgame.learning.evaluate.forward_rows`)
    eval_batch_size: PositiveInt = Field(
        default=16384,
        description="test samples per chunk when the global model is evaluated: the loss is "
        "summed chunk by chunk (lower it when a large model runs out of memory; on the CPU a "
        "model with hidden layers runs forward passes of about 1024 samples within a chunk, "
        "with the same results)",
    )
    eval_every: PositiveInt = Field(
        default=1,
        description="evaluate the global model on the test set every k-th round and at the "
        "last round; a round between them whose update changed the model reports NaN "
        "test_accuracy and test_loss (not measured); 1 evaluates every round",
    )

    threads: int | Literal["auto"] = Field(
        default="auto",
        description="CPU threads of torch and BLAS/OpenMP during the run: auto (one for a "
        "small model; more for a large one, up to the cores free to the process; the "
        "manifest's threads says how many and why) or a positive integer",
    )

    @field_validator("threads", mode="before")
    @classmethod
    def _threads(cls, value: object) -> object:
        if value == "auto" or (
            isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= MAX_THREADS
        ):
            return value
        raise ValueError(f"auto or a whole number of threads from 1 to {MAX_THREADS}")

    def lr_at(self, round_index: int) -> float:
        """Learning rate at 0-based round ``round_index``."""
        if self.lr_decay_tau is None:
            return float(self.lr)
        return float(self.lr / (1.0 + round_index / self.lr_decay_tau))

    def evaluates(self, round_: int, rounds: int) -> bool:
        """Whether the global model is evaluated after round ``round_`` of ``rounds``
        (``eval_every``: every k-th round and the last)."""
        return round_ % self.eval_every == 0 or round_ >= rounds
