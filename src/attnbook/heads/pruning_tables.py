"""The markdown tables of chapter "Pruning heads": Michel et al.'s masks with and without the gates' fine-tuning,
the pruned models against the same shapes trained from scratch, and what training the pruned models on to
convergence gains. Each function takes rows the chapter has loaded or computed (:mod:`attnbook.heads.sweeps`)
and returns the table as one markdown string (the chapter shows it with ``IPython.display.Markdown``)."""

from __future__ import annotations

from typing import Mapping, Optional, Sequence


def _bleu_with_interval(b: Mapping) -> str:
    return f"{b['bleu']:.2f} [{b['low']:.1f}, {b['high']:.1f}]"


def paired_interval(d: Optional[Mapping]) -> str:
    """A paired difference ``{"delta", "low", "high"}`` as ``+0.12 [-0.30, +0.51]`` (an en dash when None)."""
    if d is None:
        return "–"
    return f"{d['delta']:+.2f} [{d['low']:+.2f}, {d['high']:+.2f}]"


def michel_fine_tuned_table(rows: Sequence[Mapping], gate_masks_bleu: Mapping[int, float]) -> str:
    """Encoder heads kept against greedy test BLEU (result of recipe ``michel_fine_tuned_converged``, its
    ``rows``): Michel et al.'s masks without and with the gates' fine-tuning (with sacreBLEU's intervals), the
    gates' masks without fine-tuning (``gate_masks_bleu``: heads kept -> BLEU) and the fine-tuned gates."""
    lines = ["| encoder heads | Michel, no fine-tuning | gate masks, no fine-tuning | "
             "Michel, fine-tuned as the gates | gates, fine-tuned |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['n_kept']} | {_bleu_with_interval(r['bleu_not_fine_tuned'])} | "
                     f"{gate_masks_bleu[r['n_kept']]:.2f} | {_bleu_with_interval(r['bleu_fine_tuned'])} | "
                     f"{r['gate_bleu_greedy']:.2f} |")
    return "\n".join(lines)


def scratch_table(rows: Sequence[Mapping], arm: str = "pruned") -> str:
    """One line per shape and seed of :func:`attnbook.heads.sweeps.scratch_versus_pruned`'s rows: the ``arm``
    model's beam BLEU (``"pruned"``, or ``"trained on"`` for the pruned models trained on), the seed, the
    from-scratch model's beam BLEU and the paired difference scratch minus ``arm`` with its 95% interval."""
    lines = [f"| encoder heads | {arm} (beam 4) | seed | from scratch (beam 4) | "
             f"scratch - {arm} [95% interval] |", "|---|---|---|---|---|"]
    for row in rows:
        for s in row["scratch"]:
            lines.append(f"| {row['kept']} | {row['pruned_beam']:.2f} | {s['seed']} | "
                         f"{s['bleu_beam']:.2f} | {paired_interval(s)} |")
    return "\n".join(lines)


def trained_on_gains_table(gains: Sequence[Mapping]) -> str:
    """One line per row of :func:`attnbook.heads.sweeps.trained_on_gains`: beam BLEU before and after training
    on, the gain, the gain beyond the control's and the difference to the control trained on (paired 95%
    intervals), steps (epochs), how the training ended, and its minutes (threads). What a row does not
    measure (no model before training on, so no gain) is an en dash."""
    lines = ["| encoder heads | before | trained on | gain [95% interval] "
             "| gain beyond the control's [95%] | minus the control trained on [95%] "
             "| steps (epochs) | ended by | minutes (threads) |", "|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {g['label']} | {'–' if g['before'] is None else format(g['before'], '.2f')} | {g['after']:.2f} "
              f"| {paired_interval(g['gain'])} | {paired_interval(g['beyond_control'])} "
              f"| {paired_interval(g['cost'])} | {g['train_steps']} ({g['epochs']:.1f}) "
              f"| {g['stopped']} | {g['minutes']:.0f} ({g['threads']}) |" for g in gains]
    return "\n".join(lines)
