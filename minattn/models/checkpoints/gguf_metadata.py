"""A GGUF file's metadata, read by key with errors that name the file, the key and what was
expected; and a config.json-like dict read with errors that name the missing key."""
import sys


class Metadata:
    """fields: {key: value} (GGUFReader's fields, their contents()); arch: general.architecture;
    file: for messages; tensors: {GGUF name: shape as transformers orders it, [d_out, d_in]};
    read(name) -> a tensor's values, for tensors that are settings (rope_freqs); those read are
    in .settings, apart from the weights."""

    def __init__(self, fields, arch, file, tensors, read):
        self.fields, self.arch, self.file, self.tensors = fields, arch, file, tensors
        self._read, self.settings = read, set()

    def read(self, name):
        self.settings.add(name)
        return self._read(name)

    def get(self, key, default=None):
        # "{arch}.{key}", or default where the file does not have it
        return self.fields.get(f"{self.arch}.{key}", default)

    def require(self, key, kind=int):
        value = self.get(key)
        if value is None:
            raise ValueError(f"{self.file}: metadata has no {self.arch}.{key} (required)")
        if kind is int and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise ValueError(f"{self.file}: {self.arch}.{key} must be a positive int, got "
                             f"{value!r}")
        if kind is float and not isinstance(value, (int, float)):
            raise ValueError(f"{self.file}: {self.arch}.{key} must be a number, got {value!r}")
        return value

    def default(self, key, value, why):
        """The file's {arch}.{key}, or, where it has none, value, said on stderr with why."""
        if self.get(key) is not None:
            return self.get(key)
        print(f"minattn: {self.file} has no {self.arch}.{key}: using {value!r} ({why})",
              file=sys.stderr)
        return value


class Config(dict):
    """config.json as a dict whose attributes are its keys (what the config readers of
    minattn/families/ take), defaults filled in, and a missing key refused by name."""

    def __init__(self, hf, defaults):
        super().__init__({**defaults, **hf})

    def __getattr__(self, key):
        if key.startswith("__"):
            raise AttributeError(key)
        try:
            return self[key]
        except KeyError:
            raise AttributeError(f"no key {key!r}, which this family's config needs") from None
