"""The most-frequent-candidate baseline of a cloze config's data: on each question, the candidate that occurs most
often in the document (ties: the first candidate), which is what pointer-sum attention answers when the attention
is uniform. A floor to read the readers' accuracies against (chance is one over the number of candidates).

    MEMREAD_DATA=/path/to/data python scripts/cloze_frequency_baseline.py configs/cloze/gutenberg-ne-iaa.toml
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))

from memread.config import load_experiment  # noqa: E402
from memread.data.root import data_root  # noqa: E402
from memread.tasks import Task  # noqa: E402


def frequency_baseline(config: Path, root: Path) -> dict[str, dict[str, float]]:
    task = Task(load_experiment(config, ["train.progress=false"]), root)
    out = {}
    for split in ("train", "valid", "test"):
        right = total = chance = 0.0
        for batch in task.data.batches(split, 64):
            counts = (batch["doc_words"][:, :, None] == batch["cand_words"][:, None, :]).sum(1).float()
            counts[~batch["cand_mask"]] = -1
            right += (counts.argmax(1) == batch["answer"]).sum().item()
            chance += (1.0 / batch["cand_mask"].sum(1)).sum().item()
            total += len(batch["answer"])
        out[split] = {"most_frequent_candidate": right / total, "chance": chance / total, "questions": total}
    return out


if __name__ == "__main__":
    for path in sys.argv[1:]:
        print(json.dumps({"config": path, **frequency_baseline(Path(path), data_root(None))}))
