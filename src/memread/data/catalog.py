"""Every dataset memread reads: where its canonical archive (or files) are, which members are taken, where
they go under the data root, and how each is checked (``memread data download NAME``, ``memread data list``).

A :class:`Dataset` is one folder under the data root (``ROOT/<folder>``) filled from one archive
(``kind = "archive"``), or from plain files fetched one by one from one folder URL (``kind = "files"``:
each member is ``<url>/<member source>``; IWSLT14, whose preprocessed files are published as such).
Each :class:`Member` is taken from the archive by name (never by a path the archive chooses: the file
written is named here), and is checked before anything is moved into place:

* ``sha256`` pinned: the sha256 of the extracted bytes. The pins are the "uncompressed sha256" of the
  files in the benchmark data (``../shared/data/MANIFEST.md``), i.e. of the files memread's results were
  computed on; ``tests/test_download.py`` checks them against that data when it is there.
* nothing pinned (the file is not in the benchmark data, or its copy there is not byte-identical to the
  official one): the file's structure is checked by memread's own reader for it (``check``), and its
  number of records (lines, questions, files) where the official count is known (``count``).

A dataset may also name a ``check`` over its files together (``memread.data.formats.SET_CHECKS``):
IWSLT14's unpinned train files must be line-aligned across languages and with their ``.wmixerprep``
versions, word for word.

Members marked ``optional`` (README, licence files, files no reader opens) are taken and checked when
the archive holds them and are not needed for a dataset to count as present.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from memread.data.babi import TASK_NAMES


@dataclass(frozen=True)
class Member:
    path: str  # where it is written, relative to the dataset folder (a folder, for kind "tree")
    source: str  # its name in the archive: the whole name, or its end after any leading folders
    sha256: str | None = None  # of the extracted bytes (before any gzip here); None: not pinned
    check: str = ""  # structure check when nothing is pinned (memread.data.formats.CHECKS)
    count: int | None = None  # records the check must find (lines, questions, files), when known
    # "file": one archive member; "tree": every member directly under folder ``source`` whose name
    # fullmatches ``pattern`` (``count`` is then the number of files); "tar": the members under ``source``
    # whose name below it fullmatches ``pattern``, repacked as one deterministic tar.gz (``sha256`` is that
    # of the uncompressed tar stream)
    kind: str = "file"
    pattern: str = ""
    gzip: bool = False  # written as PATH.gz (gzip -9 -n): the layout globs *.gz
    optional: bool = False  # taken (and checked) when the archive has it; no reader needs it

    def written(self) -> str:
        return self.path + (".gz" if self.gzip else "")


@dataclass(frozen=True)
class Dataset:
    name: str  # memread data download NAME
    folder: str  # under the data root
    title: str
    url: str  # the canonical public archive; for kind "files", the folder URL the files are under
    archive: str  # its file name (MEMREAD_DOWNLOAD_BASE/<archive> replaces url when that is set); "" for "files"
    size: int  # download size in bytes, as published (rounded to what is known), or estimated (size_estimated)
    license: str  # shortened from MANIFEST.md's "License / terms"
    members: tuple[Member, ...]
    note: str = ""  # checksum status and caveats
    manual: str = ""  # not empty: no download; why, and how the layout is made
    extracted: str = ""  # what lands on disk, when it is worth saying (size of the kept files)
    # "archive": one archive at url, members taken from it by name; "files": each member fetched on its
    # own as <url>/<member source> (MEMREAD_DOWNLOAD_BASE/<member source> when that is set)
    kind: str = "archive"
    size_estimated: bool = False  # size is an estimate (not every file's size is published or known)
    check: str = ""  # a check over the dataset's files together (memread.data.formats.SET_CHECKS)

    @property
    def required(self) -> tuple[Member, ...]:
        return tuple(m for m in self.members if not m.optional)

    def pinned(self) -> tuple[int, int]:
        """(required members with a pinned sha256, required members)."""
        return sum(m.sha256 is not None for m in self.required), len(self.required)



# ---------------------------------------------------------------- pins (generated from MANIFEST.md)

_PTB = {  # MANIFEST.md, `ptb/`
    "ptb.test.txt": "dd65dff31e70846b2a6030a87482edcd5d199130cdcfa1f3dccbb033728deee0",
    "ptb.train.txt": "fcea919f6cf83f35d4d00c6cbf08040d13d4155226340912e2fef9c9c4102cbf",
    "ptb.valid.txt": "c9fe6985fe0d4ccb578183407d7668fc6066c20700cb4cf87d8ff1cc34df1bf2",
}
_SST = {  # MANIFEST.md, `sst/`
    "dev.txt": "0e9336aed6e4730e19f58d00a77b3f0297efdb755f7b5e598c98a05e3f97ea40",
    "test.txt": "6e54806dee95cf80cd918e7dfb3f6770f6df24bf826f289a4d1f709e1c8f6761",
    "train.txt": "e2f3f41b0b1e6d4dddc0effe3bfc2d27ed8928079aa9a03d652311614fc5feb7",
}
_SNLI = {  # MANIFEST.md, `snli/`
    "snli_1.0_dev.jsonl": "9c03faff70182ef086ebfeed2cffbabb5fcc6a84a8b3314decbbb5b01f07f4bf",
    "snli_1.0_test.jsonl": "1147550151ca8b16ddb31d8dc0e739a670a65f7c3e64aac5951eaeff103fb220",
    "snli_1.0_train_0.01.jsonl": "d1aa98e60f8986fb2115bb1ec1bc2ef59583c20fdc6f64e3fc6239581dd23368",
}
_WIKIQA = {  # MANIFEST.md, `wikiqa/`
    "LICENSE.pdf": "0a7f8a724eb30c1ff1f322d007693b4a0c79a9025ee525c605dfe88dc44eac89",
    "README.txt": "8eaf9607c12263fd393cefb101e434f53436c021812c67a12bcd9fe5100fc23f",
    "WikiQA-dev-filtered.ref": "f79cb9958ed6ed5fd734d4b8957aa3398c33a4cd204469a25b020f7c72fc36da",
    "WikiQA-dev.ref": "ea76242babd382499c6a1490f2a799c7a7420f6d9828c3b488e19c82db36f01e",
    "WikiQA-dev.tsv": "023c530e742caca2a760d48bd249e13259248c11f3b880a4c1842aa259a30a54",
    "WikiQA-dev.txt": "ef7b38990d479fbfae5a1cd4a01b75a7f0cc5c277d15c9cddb888c6f0197d543",
    "WikiQA-test-filtered.ref": "b54e30ce1311138309a9417b8ea018b9d26b58404f835d321338182ff0dabbe4",
    "WikiQA-test.ref": "a91e7aa065c350d9935a98de880c8a53825747c553a416b28ad3e1ba5a677d42",
    "WikiQA-test.tsv": "3c3b66966cb183b71abf19510bc2302295c68dd7a25284ec9cf8b63d5b6929e3",
    "WikiQA-test.txt": "957a23816df4c13056e0069fc30afbc6b56f676ba025b6c9c027fb71379e84e8",
    "WikiQA-train.ref": "aed4d2e086c1b8736b30c6914934a81bff997f2259f1c80a70f41d1575ecde7d",
    "WikiQA-train.tsv": "295757943bc4df27f09763fc73b9f63063b13a577718b17805cbc9bb436f9dbe",
    "WikiQA-train.txt": "942d65db8ca780cf38905d403f17606274329a4f3c2037973ce6b3fabb0e61b2",
}
_BABI_10K = {  # MANIFEST.md, `babi/en-10k/`
    "qa10_indefinite-knowledge_test.txt": "fde8f20ed0b3ba979058ed391a566af34653f23baab5b2793ee37f87ef4e88b7",
    "qa10_indefinite-knowledge_train.txt": "c5c0788b0446095c07a0442784cad2b59c1d58e875ebe8ad852f5e3f628613f4",
    "qa11_basic-coreference_test.txt": "46f3290d0158ce1285a40cd2d793f5a65f86ae5000226e165cbc85a3dfeb2f6f",
    "qa11_basic-coreference_train.txt": "edfcd97fecd4a5045af25e1790cf1408856ae362c39521b1b69cd32b88ec0ced",
    "qa12_conjunction_test.txt": "6437718f8f9801ce345869e910b896836cdc6fd2d01dc7b4d2df49730703b4b1",
    "qa12_conjunction_train.txt": "39d58df3564916c66cebc98befb65d605c032181e51208730fd8837a77bc166a",
    "qa13_compound-coreference_test.txt": "76a25b684f23c9cc473d8cd1465506168b9a1ec8891cfc59d0bbd87e6a064990",
    "qa13_compound-coreference_train.txt": "c530fdf122d26617a8a03ba5cdbacee87c22624ba7f50d1f07f9658c900e22d8",
    "qa14_time-reasoning_test.txt": "e3f0b19858ffbec3ed1e49076cc4d1295a89ce146c50318b862f13f202b3caf2",
    "qa14_time-reasoning_train.txt": "c322e0814eef71f088af1aa1334e7ae4b1ee6ca18f2ee94c05e2189226964ed6",
    "qa15_basic-deduction_test.txt": "32b77e117fe9acf5f94906684e3b5206de0108e646c76e1da3e022896ec7ee94",
    "qa15_basic-deduction_train.txt": "0a86673f7fafa484f8ee394048f03de19405bdc40b58f21086969efad2862010",
    "qa16_basic-induction_test.txt": "4a11e55366f2a5a859b5a81f683ee23801bdbe71ef984e51adb976bd053e8dcf",
    "qa16_basic-induction_train.txt": "27fef347ce0b25dd148efea2b15f154926e0e9069d4ea6ab9cfca3add492ab35",
    "qa17_positional-reasoning_test.txt": "9e1e0250ed4ec1831757fab26c04138f81ea557ebf6976a220db879cbed04bac",
    "qa17_positional-reasoning_train.txt": "8a383651e009db50d6c9effed5778b8646c28c55fadb1592b5f4d8d3a187bbce",
    "qa18_size-reasoning_test.txt": "d34f70eb7228a276fcb3a7854174fe562c5634f4fb454a39fc3d1ad9934be3ef",
    "qa18_size-reasoning_train.txt": "9e7c15107067d2070170ef12579a8bfe34dfc35a7ac9ebd13f2001dc1a7488f9",
    "qa19_path-finding_test.txt": "023e391f0d7f79c9e6ae1c46c093e2d0dbd50ab8fbd8965e037a75e3614c20e5",
    "qa19_path-finding_train.txt": "6cfdc6f448e3cf0e3d8a390fa3add461935b033f89ede32aeef30812401ec91e",
    "qa1_single-supporting-fact_test.txt": "55acf66cef2f6d798e2aa1d056e1ec8f24e910ea9215b639450574321132959b",
    "qa1_single-supporting-fact_train.txt": "749ea9f7c99070feb2d88c975a254417a0dcc8274add4435ae5ae24c7afc7e9d",
    "qa20_agents-motivations_test.txt": "bd3bde3788ac14ba0ae095078f7b820fbd2bfa6a34dba9d1d46a34afde9c2729",
    "qa20_agents-motivations_train.txt": "36f20f3baf6bad2297d5b9fd877e633550c36106fe78bc10ddfb7b1eede62573",
    "qa2_two-supporting-facts_test.txt": "eff93fb9cd81ba02eb765772cf7cc269769ed44ec71cbbbc19cfb16ee5eba0f6",
    "qa2_two-supporting-facts_train.txt": "d4074c0c5d54f70ce2f538056ce2b6ef6a313da336da4245f1a24f1298e37ef3",
    "qa3_three-supporting-facts_test.txt": "17795c977100baf8188f386522ae301b62d6c1a13efc01b3aea781e588b4d57f",
    "qa4_two-arg-relations_test.txt": "07f0ca18ddeea9eed4ba6d59e162adcb0ce44815721114b3540d92825509331e",
    "qa4_two-arg-relations_train.txt": "5d11b821d35234988ab907866aa7ce718e6b6d751acf63bdef52262afb59f12c",
    "qa5_three-arg-relations_test.txt": "ec825c1c8a76e63a31f0d7a7763cd63740e98332fa9bdf246a19068949bd5f97",
    "qa5_three-arg-relations_train.txt": "2506910935b701bac64fc8b1d7ff12bd8d0f47ceefca183454282bec784c12a5",
    "qa6_yes-no-questions_test.txt": "b108b16f1eccbd1c24df6dca2649079a7b2f10af7fd12d4c45a3393802de59e3",
    "qa6_yes-no-questions_train.txt": "602f379184bf3cb59660d0f7769d9c94ccdc1fc4d82dfe90bd460d985b1ff0c5",
    "qa7_counting_test.txt": "a74d1f2b91329b2bae814d41cdac2fbdfdf0328562b7d8afa9a0fa576d461e27",
    "qa7_counting_train.txt": "4a2508733bef9b38cfce4b3108a91b83cdee378de4a7370e4d32fea2dacd3b7d",
    "qa8_lists-sets_test.txt": "362a653c821a580fa315a85243b4f03bfa06fa7e0269b6f8e596f8fe6911646a",
    "qa8_lists-sets_train.txt": "9518da2d3aa5d98bec33335e0d5ba3a22c2bd1929ee679085d37eb50a7652e4a",
    "qa9_simple-negation_test.txt": "63590aff3f89993db409f0e9a9eb39c2a5b9d5efff99b255d800a891b0044d9f",
    "qa9_simple-negation_train.txt": "5f8949f6ef7d64516fc4dd5732b12b5932d057b1a614e8ac94e795fb020d4ff0",
}
_GUTENBERG = {  # MANIFEST.md, `gutenberg/`
    "README": "791b8a01e866fb107e045c712e8421fc752b672218886c2b5ce71601db1e56ae",
    "austen-emma.txt": "71b0923d75fcf2f1faa897b22da8de8e2476d7478a2b22388eb58a3420e00215",
    "austen-sense.txt": "57b169c7cfa502896dee25bd66616f61cc1d21084caf31f015176ee46fda9718",
    "blake-poems.txt": "840897a66e23a47dd1fd56b864f421b2be0af074dc081244f7995bf26939eee9",
    "chesterton-ball.txt": "c6b6d4e8c09a3f49a09f37f4e47663d4d6f048b62d86c70ccafdfd8f27059a58",
    "chesterton-brown.txt": "67027976205b4b30e367c704807f56c8ffac3e8ea6037d993e57ab1fe28447ec",
    "melville-moby_dick.txt": "dc2466ee3c2e6e2ea1f86233d142e4b5578fdc1d6f0ca657bee7572202a980c7",
    "milton-paradise.txt": "49028a77c557de1459e96c026edbe72997be2d9015925f7baefb793cd6fe706f",
    "shakespeare-caesar.txt": "7c46bd32fc84d9596bcad55b61ec3c1a390239acb190b286422855aafc2774b3",
    "shakespeare-hamlet.txt": "1eceab7027ad7e0cc25c6b6aadcb2e6bb070395cb2085f775ac732d63d5db240",
    "shakespeare-macbeth.txt": "d4a204352cfe5924cbae76f764225d120e9f7617d39cb8c949dedd3f306353ac",
    "whitman-leaves.txt": "93ebaf1dccc8f1514b4b1c2f52e64e81829113fc58cff63fb51ada0c72f99c3e",
}
_WIKITEXT2 = {  # MANIFEST.md, `wikitext-2/`
    "README.pytorch-examples": "ed96062abea03d4f4e8ca80f0caad8b07ec59687b8064319c7ee6f6d900b6286",
    "wiki.test.tokens": "d790b833ef8cf03a90db7bf1271b7520b83c45ce07ba3c1a9699df81e239eca0",
    "wiki.valid.tokens": "f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8",
}
_IWSLT = {  # MANIFEST.md, `iwslt14-de-en/`
    "test.de-en.de": "b899a137e81dc3e3c34f5a2cf16c09880ab33b8d22252483ff9c049b2a34e203",
    "test.de-en.de.wmixerprep": "8525cd221bfd0771a1899f8469304861520b90df496cf1385367de4676f6ea12",
    "test.de-en.en": "1685cc2a0c169051b66957d7f56056341161dc4617a849b649e84cdac5b73e24",
    "test.de-en.en.wmixerprep": "a66a98a0410b6e6870c6838dff23d253c4132a60315b62aa8b710c0b7c613f61",
    "valid.de-en.de": "d58e159cedc9227553ab506bf6113b72eb19ee97631c1b7bdcf5a205ce1dda0d",
    "valid.de-en.de.wmixerprep": "ae59bbddf6cccdab514a0cba7be6a4fc1cf613e48947b5b8c93638a215d2cf4d",
    "valid.de-en.en": "d9d971e784e37316ece31d9d8e33c2feeaae8543329dfcb8486f07568aea8ce8",
    "valid.de-en.en.wmixerprep": "d2f588b758601b69f7f067f065c6271970a63622fe94f09167c530676cc95050",
}
_BABI_V11 = {  # MANIFEST.md, `babi/en-v1.1/`
    "LICENSE": "d12f09a636365a040fd581ebab6bf018d6fe61973c6d4862f841a6aca2f53efa",
    "README": "12b8b677a9a801b259c012bda50b96d2ab02632f7cb8bd76c97ea1748e37947d",
    "qa10_indefinite-knowledge_test.txt": "fde8f20ed0b3ba979058ed391a566af34653f23baab5b2793ee37f87ef4e88b7",
    "qa10_indefinite-knowledge_train.txt": "0b7691689447bab05476c5b48c44999b41e747c3978df69c18fdd87b60d6e8b3",
    "qa11_basic-coreference_test.txt": "46f3290d0158ce1285a40cd2d793f5a65f86ae5000226e165cbc85a3dfeb2f6f",
    "qa11_basic-coreference_train.txt": "9468de9a1f256f43dfda693a5d07182d21149a82b65f7c2451c64e9cff5eb138",
    "qa12_conjunction_test.txt": "6437718f8f9801ce345869e910b896836cdc6fd2d01dc7b4d2df49730703b4b1",
    "qa12_conjunction_train.txt": "45c2764bb2d3c8f699d35e9d9aa7958fcd96379c6e907116cdf74526c108bb25",
    "qa13_compound-coreference_test.txt": "76a25b684f23c9cc473d8cd1465506168b9a1ec8891cfc59d0bbd87e6a064990",
    "qa13_compound-coreference_train.txt": "533a391edbda743e4c99504de88b40cdded5b1d5ef454d1390f0863f748a4cc9",
    "qa14_time-reasoning_test.txt": "e3f0b19858ffbec3ed1e49076cc4d1295a89ce146c50318b862f13f202b3caf2",
    "qa14_time-reasoning_train.txt": "b7561cbc624205c9c2fdbb8c843cfa8ad90edd65e78bb223fc6dea8113662df8",
    "qa15_basic-deduction_test.txt": "32b77e117fe9acf5f94906684e3b5206de0108e646c76e1da3e022896ec7ee94",
    "qa15_basic-deduction_train.txt": "e856ebfdcce4dd7d617c1d10f985e96a0850c0ca18e9a19a017cb710d135ed3d",
    "qa16_basic-induction_test.txt": "d38f01e551f7148eb886b9248264098fe9e0e709fe6fdd1f1186451e1a105838",
    "qa16_basic-induction_train.txt": "a3448f8cbb8ece4d5c48fa3bb5dfc0d2d4ad82b3da50c8c09c5fbe02ea6806b9",
    "qa17_positional-reasoning_test.txt": "9e1e0250ed4ec1831757fab26c04138f81ea557ebf6976a220db879cbed04bac",
    "qa17_positional-reasoning_train.txt": "20083bf56ff74f0e7cf5e3e2f8c3905cdb8ef09293c3e8cf7a96ed8b45ae2277",
    "qa18_size-reasoning_test.txt": "d34f70eb7228a276fcb3a7854174fe562c5634f4fb454a39fc3d1ad9934be3ef",
    "qa18_size-reasoning_train.txt": "18b7dcf52c9a0e87e4e7dd3d65b7e5a630de039645f52a1294197af7481d739d",
    "qa19_path-finding_test.txt": "023e391f0d7f79c9e6ae1c46c093e2d0dbd50ab8fbd8965e037a75e3614c20e5",
    "qa19_path-finding_train.txt": "dcb788352a56effb7bea1449128f31cc9c342c8c327b6df2caeee0e379e6ad3a",
    "qa1_single-supporting-fact_test.txt": "55acf66cef2f6d798e2aa1d056e1ec8f24e910ea9215b639450574321132959b",
    "qa1_single-supporting-fact_train.txt": "c64ba9b1a49bbb111ffc4cd2ae4f129d25c012399dd7ade9679eea464b9afb05",
    "qa20_agents-motivations_test.txt": "bd3bde3788ac14ba0ae095078f7b820fbd2bfa6a34dba9d1d46a34afde9c2729",
    "qa20_agents-motivations_train.txt": "29580ad55fb7b4b29ba014696056cc68f8f347dac3be88470fd692ad60150398",
    "qa2_two-supporting-facts_test.txt": "eff93fb9cd81ba02eb765772cf7cc269769ed44ec71cbbbc19cfb16ee5eba0f6",
    "qa2_two-supporting-facts_train.txt": "a4978af5bc0dc30191810e7c9949aaa6eae939ed0f6beb9fcb5f4330c2a27860",
    "qa3_three-supporting-facts_test.txt": "17795c977100baf8188f386522ae301b62d6c1a13efc01b3aea781e588b4d57f",
    "qa3_three-supporting-facts_train.txt": "a6e78019f36a02a7ed71fe6aaded0b563ff09c8deec392931801fcd9c6af4d60",
    "qa4_two-arg-relations_test.txt": "07f0ca18ddeea9eed4ba6d59e162adcb0ce44815721114b3540d92825509331e",
    "qa4_two-arg-relations_train.txt": "c9370502d85fa382f32d1fea2111e817f81ae9e3e79eb2924a1a5392a90417fa",
    "qa5_three-arg-relations_test.txt": "ec825c1c8a76e63a31f0d7a7763cd63740e98332fa9bdf246a19068949bd5f97",
    "qa5_three-arg-relations_train.txt": "086cd59c3ca9677bfac3d6a22ca5853c76a5c1fbae3159c7c4a6aef759a74ec0",
    "qa6_yes-no-questions_test.txt": "b108b16f1eccbd1c24df6dca2649079a7b2f10af7fd12d4c45a3393802de59e3",
    "qa6_yes-no-questions_train.txt": "5a133115ee35d475776df703ff605d145b11effbcdbf7e74861f9d5639246a5a",
    "qa7_counting_test.txt": "a74d1f2b91329b2bae814d41cdac2fbdfdf0328562b7d8afa9a0fa576d461e27",
    "qa7_counting_train.txt": "dca03bd91876951c49f1c971c83c9dd55404de60201b7b6435451cf7ddb4751c",
    "qa8_lists-sets_test.txt": "362a653c821a580fa315a85243b4f03bfa06fa7e0269b6f8e596f8fe6911646a",
    "qa8_lists-sets_train.txt": "058604df6f9440458317e8ae685d2b7b84261e1a80b4d6410a9140d16f81bf06",
    "qa9_simple-negation_test.txt": "63590aff3f89993db409f0e9a9eb39c2a5b9d5efff99b255d800a891b0044d9f",
    "qa9_simple-negation_train.txt": "0c3b89921af0caea1c4059ee3f7b7f2a88869f924195a428da37820446b8c49f",
}
_IMDB = {  # MANIFEST.md, `imdb-acl/`
    "README": "8997da3508dfb0d2274dce886966cf353f32e62c504b9504102e8a8bcf3eb034",
    "aclImdb_v1_train_test.tar": "5bda8457a14a86352183006e8b2c6c2d768bce6fe5ae17e3bf9c866c464db1ec",
}


def _babi(source: str, pins: dict[str, str], unpinned_count: int | None) -> tuple[Member, ...]:
    members = []
    for task, name in TASK_NAMES.items():
        for split in ("train", "test"):
            f = f"qa{task}_{name}_{split}.txt"
            sha = pins.get(f)
            members.append(Member(f, f"{source}/{f}", sha, check="" if sha else "babi",
                                  count=None if sha else unpinned_count))
    return tuple(members)


_GUTENBERG_BOOKS = ("austen-emma", "austen-sense", "blake-poems", "chesterton-ball", "chesterton-brown",
                    "melville-moby_dick", "milton-paradise", "shakespeare-caesar", "shakespeare-hamlet",
                    "shakespeare-macbeth", "whitman-leaves")
_CBT_CLASSES = ("NE", "CN", "V", "P")
_CBT_SPLITS = {"train": None, "valid_2000ex": 2000, "test_2500ex": 2500}
_IMDB_MEMBERS = (r"README|imdb\.vocab|imdbEr\.txt|(?:train|test)/urls_(?:pos|neg)\.txt"
                 r"|(?:train|test)/(?:pos|neg)/\d+_\d+\.txt")
_PYTORCH_NMT = "bf28dae8a4c71e1f3f3fcb51e989fab905886f44"  # pcyin/pytorch_nmt, the commit MANIFEST.md names
_IWSLT_FILES = tuple(f"{s}.de-en.{lang}{x}" for s in ("train", "valid", "test") for lang in ("de", "en")
                     for x in ("", ".wmixerprep"))
_MIXER = ("the MIXER preprocessing of IWSLT 2014 de-en (Ranzato et al. 2015: Moses-tokenized, lowercased, "
          "MIXER's train/valid/test split; .wmixerprep with rare words mapped to <unk>) as distributed by "
          "pcyin/pytorch_nmt (its data/ folder at commit bf28dae8a4c7, plain files, not an archive), not a re-run of "
          "MIXER's prepareData.sh (which needs Moses' Perl scripts and the raw WIT3 archive)")

DATASETS: dict[str, Dataset] = {d.name: d for d in (
    Dataset(
        "ptb", "ptb", "Penn Treebank, Mikolov's language-modelling version",
        "http://www.fit.vutbr.cz/~imikolov/rnnlm/simple-examples.tgz", "simple-examples.tgz", 34_900_000,
        "LDC User Agreement for Non-Members (WSJ text); research use",
        tuple(Member(f"ptb.{s}.txt", f"simple-examples/data/ptb.{s}.txt", _PTB[f"ptb.{s}.txt"])
              for s in ("train", "valid", "test")),
        note="all 3 files pinned (the canonical MD5s, torchtext's, are those of the same bytes)"),
    Dataset(
        "sst", "sst", "Stanford Sentiment Treebank, PTB-bracketed trees",
        "https://nlp.stanford.edu/sentiment/trainDevTestTrees_PTB.zip", "trainDevTestTrees_PTB.zip", 790_000,
        "no explicit licence; research use, cite Socher et al. 2013",
        tuple(Member(f"{s}.txt", f"trees/{s}.txt", _SST[f"{s}.txt"]) for s in ("train", "dev", "test")),
        note="all 3 pinned; the train pin is of the benchmark copy, the first 8,544 lines of a train+dev "
             "concatenation (MANIFEST.md), so it assumes that concatenation was byte-exact"),
    Dataset(
        "snli", "snli", "SNLI 1.0",
        "https://nlp.stanford.edu/projects/snli/snli_1.0.zip", "snli_1.0.zip", 94_600_000,
        "CC BY-SA 4.0",
        (Member("snli_1.0_train.jsonl", "snli_1.0/snli_1.0_train.jsonl", check="snli", count=550_152),
         Member("snli_1.0_dev.jsonl", "snli_1.0/snli_1.0_dev.jsonl", _SNLI["snli_1.0_dev.jsonl"]),
         Member("snli_1.0_test.jsonl", "snli_1.0/snli_1.0_test.jsonl", _SNLI["snli_1.0_test.jsonl"]),
         Member("README.txt", "snli_1.0/README.txt", optional=True)),
        note="dev and test pinned; train (not in the benchmark data) has no pinned checksum: every line must be "
             "an SNLI JSON record (gold_label, sentence1, sentence2), 550,152 of them"),
    Dataset(
        "wikiqa", "wikiqa", "Microsoft Research WikiQA Corpus v1.0",
        "https://download.microsoft.com/download/E/5/F/E5FCFCEE-7005-4814-853D-DAA7C66507E0/WikiQACorpus.zip",
        "WikiQACorpus.zip", 7_100_000,
        "Microsoft Research Data License Agreement: non-commercial research; keep LICENSE.pdf with the data",
        tuple(Member(f, f"WikiQACorpus/{f}", _WIKIQA[f]) for s in ("train", "dev", "test")
              for f in (f"WikiQA-{s}.tsv", f"WikiQA-{s}.ref"))
        + tuple(Member(f, f"WikiQACorpus/{f}", _WIKIQA[f]) for f in ("WikiQA-dev-filtered.ref", "WikiQA-test-filtered.ref"))
        + tuple(Member(f, f"WikiQACorpus/{f}", _WIKIQA[f], optional=True)
                for f in ("WikiQA-train.txt", "WikiQA-dev.txt", "WikiQA-test.txt", "README.txt", "LICENSE.pdf")),
        note="all 8 files the readers open pinned, and the optional .txt, README.txt and LICENSE.pdf"),
    Dataset(
        "babi-en-10k", "babi/en-10k", "bAbI QA tasks v1.2, en-10k",
        "https://dl.fbaipublicfiles.com/babi/tasks_1-20_v1-2.tar.gz", "tasks_1-20_v1-2.tar.gz", 15_700_000,
        "CC BY 3.0 (Facebook)",
        _babi("tasks_1-20_v1-2/en-10k", _BABI_10K, 10_000),
        note="39 of 40 pinned; qa3_three-supporting-facts_train.txt (not in the benchmark data) has no pinned "
             "checksum: it must read as bAbI (read_babi) with 10,000 questions"),
    Dataset(
        "babi-en-v1.1", "babi/en-v1.1", "bAbI QA tasks v1.1, 'en' 1k set",
        "http://www.thespermwhale.com/jaseweston/babi/tasks_1-20_v1-1.tar.gz", "tasks_1-20_v1-1.tar.gz", 1_200_000,
        "CC BY 3.0 (Facebook)",
        _babi("tasksv11/en", _BABI_V11, None)
        + (Member("README", "tasksv11/README", _BABI_V11["README"], optional=True),
           Member("LICENSE", "tasksv11/LICENSE", _BABI_V11["LICENSE"], optional=True)),
        note="all 40 pinned (and README, LICENSE); the v1.1 archive is on Jason Weston's site only"),
    Dataset(
        "glove", "glove", "GloVe 6B, 50d (the 50d file only)",
        "https://nlp.stanford.edu/data/glove.6B.zip", "glove.6B.zip", 862_200_000,
        "PDDL 1.0 (Stanford NLP)",
        (Member("glove.6B.50d.txt", "glove.6B.50d.txt", check="glove", count=400_000),),
        note="no pinned checksum (the benchmark copy is re-serialized, not byte-identical): 400,000 lines of a "
             "word and 50 numbers",
        extracted="glove.6B.50d.txt only, 171,350,079 bytes (163 MiB); the 100d/200d/300d files are not extracted"),
    Dataset(
        "gutenberg", "gutenberg", "Project Gutenberg selections, NLTK 'gutenberg' corpus (11 books)",
        "https://raw.githubusercontent.com/nltk/nltk_data/gh-pages/packages/corpora/gutenberg.zip", "gutenberg.zip",
        4_300_000, "public domain (Project Gutenberg etexts)",
        tuple(Member(f"{b}.txt", f"gutenberg/{b}.txt", _GUTENBERG[f"{b}.txt"], gzip=True) for b in _GUTENBERG_BOOKS)
        + (Member("README", "gutenberg/README", optional=True),),
        note="all 11 books pinned (of the 2008 NLTK edition: a later re-encoding of a book would be refused); "
             "written gzipped, as the configs glob gutenberg/*.txt.gz; the NLTK zip's other books (bible-kjv, "
             "austen-persuasion, chesterton-thursday, carroll-alice, ...) are not taken: the configs' train split "
             "is every book in the folder"),
    Dataset(
        "wikitext-2", "wikitext-2", "WikiText-2 (v1, tokenized)",
        "https://wikitext.smerity.com/wikitext-2-v1.zip", "wikitext-2-v1.zip", 4_475_746,
        "CC BY-SA (Salesforce Research; Wikipedia text)",
        (Member("wiki.train.tokens", "wikitext-2/wiki.train.tokens", check="wikitext", count=36_718),
         Member("wiki.valid.tokens", "wikitext-2/wiki.valid.tokens", _WIKITEXT2["wiki.valid.tokens"]),
         Member("wiki.test.tokens", "wikitext-2/wiki.test.tokens", _WIKITEXT2["wiki.test.tokens"])),
        note="valid and test pinned; train (not in the benchmark data) has no pinned checksum: 36,718 lines of "
             "WikiText articles"),
    Dataset(
        "wikitext-103", "wikitext-103", "WikiText-103 (v1, tokenized)",
        "https://wikitext.smerity.com/wikitext-103-v1.zip", "wikitext-103-v1.zip", 190_229_076,
        "CC BY-SA (Salesforce Research; Wikipedia text)",
        (Member("wiki.train.tokens", "wikitext-103/wiki.train.tokens", check="wikitext", count=1_801_350),
         Member("wiki.valid.tokens", "wikitext-103/wiki.valid.tokens", check="wikitext", count=3_760),
         Member("wiki.test.tokens", "wikitext-103/wiki.test.tokens", check="wikitext", count=4_358)),
        note="no pinned checksum (not in the benchmark data; its valid/test differ from WikiText-2's in <unk>): "
             "1,801,350 / 3,760 / 4,358 lines of WikiText articles"),
    Dataset(
        "iwslt14-de-en", "iwslt14-de-en", "IWSLT 2014 German-English, MIXER preprocessing (pytorch_nmt's copy)",
        f"https://raw.githubusercontent.com/pcyin/pytorch_nmt/{_PYTORCH_NMT}/data", "", 64_000_000,
        "CC BY 4.0 (pcyin/pytorch_nmt, the repo); TED talks via WIT3, CC BY-NC-ND (TED terms)",
        tuple(Member(f, f, _IWSLT.get(f), gzip=True) for f in _IWSLT_FILES),
        note=_MIXER + "; the 8 valid and test files pinned (6,969 and 6,750 pairs); the 4 train files (about 153k "
             "pairs, not in the benchmark data) have no pinned checksum: de and en and their .wmixerprep must have "
             "the same number of lines, each .wmixerprep line the raw line's words with some as <unk> (as in valid "
             "and test; a README of a course copy of pytorch_nmt says .wmixerprep has 'long sentences chopped', "
             "none is in valid or test and MIXER's train is already cut to 1-50 words, but --no-verify accepts "
             "train if it has some), every file UTF-8 ending with a newline; written gzipped, as the benchmark "
             "data lays them out (the pins are of the uncompressed bytes); the size is an estimate: valid and test "
             "are 5.4 MB, train ~22 times the valid files (MIXER's valid is every 23rd line of the cleaned train)",
        kind="files", size_estimated=True, check="iwslt"),
    Dataset(
        "cbt", "cbt", "Children's Book Test (CBTest)",
        "http://www.thespermwhale.com/jaseweston/babi/CBTest.tgz", "CBTest.tgz", 120_000_000,
        "GNU Free Documentation License v1.3",
        tuple(Member(f"cbtest_{c}_{s}.txt", f"CBTest/data/cbtest_{c}_{s}.txt", check="cbt", count=n)
              for c in _CBT_CLASSES for s, n in _CBT_SPLITS.items())
        + tuple(Member(f"cbt_{s}.txt", f"CBTest/data/cbt_{s}.txt", check="cbt-books") for s in ("train", "valid", "test")),
        note="no pinned checksum (not in the benchmark data): every cbtest_* file must read as CBT with 20 "
             "context lines (read_cbt's rules), valid 2,000 and test 2,500 questions; the raw-book files start with "
             "_BOOK_TITLE_"),
    Dataset(
        "cnn", "cnn", "CNN cloze questions, DeepMind rc-data (questions only)",
        "https://drive.usercontent.google.com/download?id=0BwmD_VLjROrfTTljRDVZMFJnVWM&export=download&confirm=t",
        "cnn.tgz", 550_000_000,
        "not in MANIFEST.md (not obtained); CNN news articles, research use (Hermann et al. 2015)",
        tuple(Member(f"questions/{s}", f"cnn/questions/{s}", kind="tree", pattern=r"[A-Za-z0-9_-]+\.question",
                     check="rc-question", count=n)
              for s, n in (("training", 380_298), ("validation", 3_924), ("test", 3_198))),
        note="no pinned checksum (not in the benchmark data): every .question file must read as rc-data "
             "(read_question), 380,298 / 3,924 / 3,198 of them; hosted on Google Drive (Kyunghyun Cho's DMQA "
             "page), so --url may be needed if Google changes its download page"),
    Dataset(
        "imdb-acl", "imdb-acl", "Large Movie Review Dataset v1.0 (aclImdb), labelled train and test",
        "https://ai.stanford.edu/~amaas/data/sentiment/aclImdb_v1.tar.gz", "aclImdb_v1.tar.gz", 84_125_825,
        "no licence stated; research use, cite Maas et al. 2011",
        (Member("aclImdb_v1_train_test.tar.gz", "aclImdb", _IMDB["aclImdb_v1_train_test.tar"], kind="tar",
                pattern=_IMDB_MEMBERS),
         Member("README", "aclImdb/README", _IMDB["README"], optional=True)),
        note="pinned: the 50,007 labelled-review, README, vocabulary and url files are repacked as the benchmark's "
             "deterministic aclImdb_v1_train_test.tar.gz (sorted, mtime 0, owner 0, GNU format) and the sha256 "
             "of that tar is MANIFEST.md's; train/unsup and the .feat files are left out"),
)}
