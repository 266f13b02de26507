// vocab.cpp — loads a Vocab from GGUF metadata (shared/spec/gguf.md §4.1, §4.4), deriving
// flags, special ids, attributes and the end-of-generation set in llama.cpp's order, since
// later steps read what earlier ones set (e.g. EOG texts are forced to CONTROL before the
// special-token list is built, which changes what parse_special=false may match).
#include "vocab.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/error.h"
#include "gguf/gguf_reader.h"
#include "unicode.h"

namespace gaacrt::tok {
namespace {

// tokenizer.ggml.pre values accepted for byte-level BPE: the regex family and the flags each
// sets beyond the BPE defaults (clean_spaces on, add_bos off). Values whose regexes we do not
// implement are refused as unknown rather than silently pre-tokenized the wrong way.
struct PreInfo {
  const char* name;
  PreType type;
  bool clean_spaces;
  bool ignore_merges_and_bos;  // LLAMA3 family: ignore_merges = add_bos = true
};
constexpr PreInfo kPreTable[] = {
    {"default", PreType::DEFAULT, true, false},
    {"llama3", PreType::LLAMA3, true, true},    {"llama-v3", PreType::LLAMA3, true, true},
    {"llama-bpe", PreType::LLAMA3, true, true}, {"falcon3", PreType::LLAMA3, true, true},
    {"falcon-h1", PreType::LLAMA3, true, true}, {"pixtral", PreType::LLAMA3, true, true},
    {"midm-2.0", PreType::LLAMA3, true, true},  {"lfm2", PreType::LLAMA3, true, true},
    {"gpt-2", PreType::GPT2, true, false},      {"phi-2", PreType::GPT2, true, false},
    {"jina-es", PreType::GPT2, true, false},    {"jina-de", PreType::GPT2, true, false},
    {"gigachat", PreType::GPT2, true, false},   {"jina-v2-es", PreType::GPT2, true, false},
    {"jina-v2-de", PreType::GPT2, true, false}, {"a.x-4.0", PreType::GPT2, true, false},
    {"mellum", PreType::GPT2, true, false},     {"modern-bert", PreType::GPT2, true, false},
    {"exaone4", PreType::GPT2, true, false},
    {"qwen2", PreType::QWEN2, false, false},    {"deepseek-r1-qwen", PreType::QWEN2, false, false},
    {"kormo", PreType::QWEN2, false, false},    {"f2llmv2", PreType::QWEN2, false, false},
    {"megrez", PreType::QWEN2, true, false},    {"stablelm2", PreType::QWEN2, true, false},
    {"smollm", PreType::SMOLLM, false, false},  {"starcoder", PreType::SMOLLM, true, false},
    {"refact", PreType::SMOLLM, true, false},   {"command-r", PreType::SMOLLM, false, false},
    {"codeshell", PreType::SMOLLM, true, false}, {"exaone", PreType::SMOLLM, true, false},
    {"minerva-7b", PreType::SMOLLM, true, false},
};

// Texts that mark end-of-generation tokens (llama.cpp issue #9606 heuristic) and the texts by
// which eot / eom / FIM tokens are recognised when the file does not name them.
const char* const kEogTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>", "[e~["};
const char* const kEotTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "[EOT]", "<\xEF\xBD\x9C" "end\xE2\x96\x81" "of\xE2\x96\x81" "sentence\xEF\xBD\x9C>",
    "<end_of_utterance>"};
const char* const kEomTexts[] = {"<|eom_id|>"};
const char* const kFimPreTexts[] = {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>",
                                    "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>", "<PRE>",
                                    "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>"};
const char* const kFimSufTexts[] = {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>",
                                    "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "hole\xEF\xBD\x9C>", "<SUF>",
                                    "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>"};
const char* const kFimMidTexts[] = {"<|fim_middle|>", "<fim-middle>", "<fim_middle>",
                                    "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>", "<MID>",
                                    "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>"};
const char* const kFimPadTexts[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"};
const char* const kFimRepTexts[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"};
const char* const kFimSepTexts[] = {"<|file_sep|>"};

template <size_t N>
bool one_of(const std::string& s, const char* const (&list)[N]) {
  for (const char* t : list)
    if (s == t) return true;
  return false;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string merge_key(std::string_view left, std::string_view right) {
  std::string k = std::to_string(left.size());
  k += ':';
  k.append(left);
  k.append(right);
  return k;
}

}  // namespace

// Friend of Vocab: the loading steps, each reading the file and what earlier steps derived.
struct VocabLoader {
  const GGUFFile& f;
  Vocab& v;

  [[noreturn]] void fail(const char* kind, const std::string& what) const {
    throw Error("tokenizer", kind, f.path() + ": " + what);
  }

  const GGUFValue& array_key(const char* key, bool strings) const {
    const GGUFValue* a = f.find(key);
    if (!a) fail("missing_key", strfmt("no '%s' in the metadata", key));
    if (!a->is_array() || (strings != (a->elem == GGUFValueType::STRING)))
      fail("bad_value", strfmt("'%s' must be an array of %s, found %s", key, strings ? "strings" : "numbers",
                               gguf_value_type_name(a->is_array() ? a->elem : a->type)));
    return *a;
  }

  void type_and_flags() {
    const GGUFValue* m = f.find("tokenizer.ggml.model");
    if (!m) fail("missing_key", "no 'tokenizer.ggml.model' in the metadata: the file has no tokenizer");
    v.model = std::string(m->as_string("tokenizer.ggml.model"));
    v.pre_name = f.get_string("tokenizer.ggml.pre", "");
    if (v.model == "llama") {
      v.type = VocabType::SPM;
      v.bos = 1, v.eos = 2, v.unk = 0;
      v.add_space_prefix = true, v.clean_spaces = false, v.add_bos = true, v.add_eos = false;
    } else if (v.model == "gpt2") {
      v.type = VocabType::BPE;
      v.bos = 11, v.eos = 11;
      v.add_space_prefix = false, v.escape_whitespaces = false, v.clean_spaces = true;
      // A missing pre-tokenizer falls back to "default" (llama.cpp warns that quality degrades).
      const std::string pre = v.pre_name.empty() ? "default" : v.pre_name;
      const PreInfo* info = nullptr;
      for (const PreInfo& p : kPreTable)
        if (pre == p.name) info = &p;
      if (!info) fail("unknown_tokenizer", strfmt("unknown pre-tokenizer tokenizer.ggml.pre = '%s'", pre.c_str()));
      v.pre = info->type;
      v.clean_spaces = info->clean_spaces;
      if (info->ignore_merges_and_bos) v.ignore_merges = v.add_bos = true;
    } else {
      fail("unknown_tokenizer", strfmt("unknown tokenizer tokenizer.ggml.model = '%s' (gaacrt reads 'gpt2' "
                                       "byte-level BPE and 'llama' SentencePiece)", v.model.c_str()));
    }
    v.add_space_prefix = f.get_bool("tokenizer.ggml.add_space_prefix", v.add_space_prefix);
  }

  void tokens() {
    const GGUFValue& toks = array_key("tokenizer.ggml.tokens", true);
    const size_t n = toks.strings.size();
    if (n == 0 || n > 0x7FFFFFFF) fail("bad_value", strfmt("tokenizer.ggml.tokens has %zu entries", n));
    const GGUFValue* scores = f.find("tokenizer.ggml.scores");
    const GGUFValue* types = f.find("tokenizer.ggml.token_type");
    if (scores) {
      array_key("tokenizer.ggml.scores", false);
      if (scores->count < n) fail("bad_value", strfmt("tokenizer.ggml.scores has %llu entries for %zu tokens",
                                                      (unsigned long long)scores->count, n));
    }
    if (types) {
      array_key("tokenizer.ggml.token_type", false);
      if (types->count < n) fail("bad_value", strfmt("tokenizer.ggml.token_type has %llu entries for %zu tokens",
                                                     (unsigned long long)types->count, n));
    }
    v.text.resize(n);
    v.score.assign(n, 0.0f);
    v.attr.assign(n, ATTR_NORMAL);
    for (size_t i = 0; i < n; ++i) {
      v.text[i] = toks.strings[i].empty() ? "[EMPTY_" + std::to_string(i) + "]" : std::string(toks.strings[i]);
      if (scores) v.score[i] = static_cast<float>(scores->number_at(i));
      if (types) {
        switch (types->int_at(i)) {
          case 1: v.attr[i] = ATTR_NORMAL; break;
          case 2: v.attr[i] = ATTR_UNKNOWN; break;
          case 3: v.attr[i] = ATTR_CONTROL; break;
          case 4: v.attr[i] = ATTR_USER_DEFINED; break;
          case 5: v.attr[i] = ATTR_UNUSED; break;
          case 6: v.attr[i] = ATTR_BYTE; break;
          default: v.attr[i] = ATTR_UNDEFINED; break;
        }
      }
    }
    if (const int32_t first = v.index_.build(v.text); first >= 0) {
      const int32_t again = v.index_.duplicate();
      fail("duplicate_token", strfmt("token text '%s' appears twice, as ids %d and %d", v.text[again].c_str(),
                                     first, again));
    }
  }

  void merges() {
    if (v.type != VocabType::BPE) return;
    const GGUFValue& m = array_key("tokenizer.ggml.merges", true);
    v.merges.reserve(m.strings.size());
    for (size_t i = 0; i < m.strings.size(); ++i) {
      // "left right", split at the first space after index 0: a left side may start with a
      // space-like character, never contain one.
      const std::string_view w = m.strings[i];
      const size_t sp = w.size() > 1 ? w.find(' ', 1) : std::string_view::npos;
      const std::string_view left = sp == std::string_view::npos ? std::string_view() : w.substr(0, sp);
      const std::string_view right = sp == std::string_view::npos ? std::string_view() : w.substr(sp + 1);
      const int32_t l = v.find(left), r = v.find(right);
      const int32_t rank = static_cast<int32_t>(i);
      if (l != kNoToken && r != kNoToken) {
        const int32_t result = v.find(std::string(left) + std::string(right));
        v.merges.emplace((static_cast<uint64_t>(l) << 32) | static_cast<uint32_t>(r), MergeRule{rank, result});
      } else {
        v.merges_by_text.emplace(merge_key(left, right), rank);  // first occurrence keeps its rank
      }
    }
  }

  void byte_tokens() {
    char hex[8];
    for (int b = 0; b < 256; ++b) {
      if (v.type == VocabType::BPE) {
        v.byte_token[b] = v.find(byte_to_utf8(static_cast<uint8_t>(b)));
      } else {
        // SentencePiece byte fallback: "<0xXX>" (uppercase hex), else the raw 1-byte text.
        std::snprintf(hex, sizeof hex, "<0x%02X>", b);
        int32_t id = v.find(hex);
        if (id == kNoToken) id = v.find(std::string(1, static_cast<char>(b)));
        v.byte_token[b] = id;
      }
    }
    v.linefeed = v.byte_token['\n'] != kNoToken ? v.byte_token['\n'] : v.pad;
    if (v.type == VocabType::SPM) {
      v.byte_pairs.assign(1024, 0);
      for (const std::string& t : v.text)
        for (size_t k = 1; k < t.size(); ++k) {
          const uint32_t pair = (static_cast<uint32_t>(static_cast<uint8_t>(t[k - 1])) << 8) | static_cast<uint8_t>(t[k]);
          v.byte_pairs[pair >> 6] |= 1ull << (pair & 63);
        }
    }
  }

  void special_ids() {
    struct Key { const char* key; int32_t* id; };
    const Key keys[] = {
        {"tokenizer.ggml.bos_token_id", &v.bos},         {"tokenizer.ggml.eos_token_id", &v.eos},
        {"tokenizer.ggml.eot_token_id", &v.eot},         {"tokenizer.ggml.eom_token_id", &v.eom},
        {"tokenizer.ggml.unknown_token_id", &v.unk},     {"tokenizer.ggml.seperator_token_id", &v.sep},
        {"tokenizer.ggml.padding_token_id", &v.pad},     {"tokenizer.ggml.mask_token_id", &v.mask},
        {"tokenizer.ggml.fim_pre_token_id", &v.fim_pre}, {"tokenizer.ggml.fim_suf_token_id", &v.fim_suf},
        {"tokenizer.ggml.fim_mid_token_id", &v.fim_mid}, {"tokenizer.ggml.fim_pad_token_id", &v.fim_pad},
        {"tokenizer.ggml.fim_rep_token_id", &v.fim_rep}, {"tokenizer.ggml.fim_sep_token_id", &v.fim_sep},
        {"tokenizer.ggml.prefix_token_id", &v.fim_pre},  {"tokenizer.ggml.suffix_token_id", &v.fim_suf},
        {"tokenizer.ggml.middle_token_id", &v.fim_mid},
    };
    const auto n = static_cast<int64_t>(v.n_tokens());
    for (const Key& k : keys) {
      if (*k.id >= n) *k.id = kNoToken;  // a default past the vocabulary is disabled
      const int64_t id = f.get_int(k.key, -1);
      if (id >= 0 && id < n) *k.id = static_cast<int32_t>(id);  // out-of-range keys keep the default
    }
    v.add_bos = f.get_bool("tokenizer.ggml.add_bos_token", v.add_bos);
    v.add_eos = f.get_bool("tokenizer.ggml.add_eos_token", v.add_eos);
    // Asked to add a token the vocabulary does not have: do not add it (llama.cpp warns).
    if (v.bos == kNoToken) v.add_bos = false;
    if (v.eos == kNoToken) v.add_eos = false;
  }

  // Recognises eot/eom/FIM tokens by text when the file does not name them. Among several
  // candidates the lowest id wins (llama.cpp takes the first in hash-map order).
  void detect_by_text() {
    struct Rule { int32_t* id; const char* const* texts; size_t n; };
    const Rule rules[] = {
        {&v.eot, kEotTexts, std::size(kEotTexts)},          {&v.eom, kEomTexts, std::size(kEomTexts)},
        {&v.fim_pre, kFimPreTexts, std::size(kFimPreTexts)}, {&v.fim_suf, kFimSufTexts, std::size(kFimSufTexts)},
        {&v.fim_mid, kFimMidTexts, std::size(kFimMidTexts)}, {&v.fim_pad, kFimPadTexts, std::size(kFimPadTexts)},
        {&v.fim_rep, kFimRepTexts, std::size(kFimRepTexts)}, {&v.fim_sep, kFimSepTexts, std::size(kFimSepTexts)},
    };
    for (const Rule& r : rules) {
      if (*r.id != kNoToken) continue;
      int32_t best = kNoToken;
      for (size_t k = 0; k < r.n; ++k) {
        const int32_t id = v.find(r.texts[k]);
        if (id != kNoToken && (best == kNoToken || id < best)) best = id;
      }
      if (best != kNoToken) {
        *r.id = best;
        v.attr[best] |= ATTR_CONTROL;  // "control-looking token" made control
      }
    }
    // Control tokens named "...unused..." are marked unused (informational only).
    for (size_t i = 0; i < v.n_tokens(); ++i)
      if ((v.attr[i] & ATTR_CONTROL) && v.text[i].find("unused") != std::string::npos) v.attr[i] |= ATTR_UNUSED;
  }

  void eog_set() {
    std::vector<int32_t> eog;
    auto add = [&](int32_t id) {
      if (id != kNoToken && std::find(eog.begin(), eog.end(), id) == eog.end()) eog.push_back(id);
    };
    add(v.fim_pad), add(v.fim_rep), add(v.fim_sep);
    for (const char* t : kEogTexts) {
      const int32_t id = v.find(t);
      if (id == kNoToken) continue;
      add(id);
      v.attr[id] |= ATTR_CONTROL;
    }
    // gpt-oss: these are rendered in the output, so they are user-defined, not control.
    for (const char* t : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"})
      if (int32_t id = v.find(t); id != kNoToken) v.attr[id] = ATTR_USER_DEFINED;
    add(v.eos), add(v.eot), add(v.eom);
    auto has = [&](const char* t) {
      const int32_t id = v.find(t);
      return id != kNoToken && std::find(eog.begin(), eog.end(), id) != eog.end() ? id : kNoToken;
    };
    auto drop = [&](int32_t id, uint32_t attr) {
      eog.erase(std::find(eog.begin(), eog.end(), id));
      v.attr[id] = attr;
    };
    // Harmony / solar-open chat formats continue after <|end|>: it is not an end of generation
    // when <|return|> + <|call|> (or <|calls|> + <|flush|>) are present.
    const int32_t end = has("<|end|>");
    const bool call = has("<|call|>") != kNoToken || has("<|calls|>") != kNoToken;
    if (end != kNoToken && call && (has("<|return|>") != kNoToken || has("<|flush|>") != kNoToken))
      drop(end, ATTR_USER_DEFINED);
    // Gemma 4 / PaddleOCR: "</s>" is ordinary text when <|tool_response> is an EOG token.
    if (has("<|tool_response>") != kNoToken && has("</s>") != kNoToken) drop(has("</s>"), ATTR_NORMAL);
    std::sort(eog.begin(), eog.end());
    v.eog = std::move(eog);
  }

  void special_list() {
    for (size_t i = 0; i < v.n_tokens(); ++i)
      if (v.attr[i] & (ATTR_CONTROL | ATTR_USER_DEFINED | ATTR_UNKNOWN)) v.special_tokens.push_back(static_cast<int32_t>(i));
    // Longest first, so that "<|im_start|>" is cut before any shorter special inside it. Ties
    // keep id order (llama.cpp's std::sort leaves them unspecified).
    std::stable_sort(v.special_tokens.begin(), v.special_tokens.end(),
                     [&](int32_t a, int32_t b) { return v.text[a].size() > v.text[b].size(); });
  }

  // Bytes each token detokenizes to when special tokens are shown (spec §4.3 "Detokenize").
  void pieces() {
    static const std::string kSpmSpace = "\xE2\x96\x81";  // U+2581 '▁'
    v.piece.resize(v.n_tokens());
    std::vector<uint32_t> cps;
    for (size_t i = 0; i < v.n_tokens(); ++i) {
      const uint32_t a = v.attr[i];
      const std::string& t = v.text[i];
      std::string& out = v.piece[i];
      if (a & (ATTR_CONTROL | ATTR_UNKNOWN | ATTR_USER_DEFINED)) {
        out = t;
      } else if (a & ATTR_NORMAL) {
        if (v.type == VocabType::SPM) {
          for (size_t k = 0; k < t.size();) {
            if (t.compare(k, 3, kSpmSpace) == 0) { out += ' '; k += 3; } else { out += t[k++]; }
          }
        } else {
          // Byte-level BPE: every character of the text names one byte. A character outside
          // the 256 is shown as "[UNK_BYTE_0x<its utf-8 hex><token text>]", as llama.cpp does.
          cps.clear();
          utf8_to_cpts(t, cps);
          for (uint32_t cp : cps) {
            const int b = cpt_to_byte(cp);
            if (b >= 0) { out += static_cast<char>(b); continue; }
            std::string u;
            append_utf8(u, cp);
            out += "[UNK_BYTE_0x";
            for (unsigned char c : u) out += strfmt("%02x", c);
            out += t + "]";
          }
        }
      } else if ((a & ATTR_BYTE) && v.type == VocabType::SPM && t.size() >= 5) {
        out = std::string(1, static_cast<char>(std::strtol(t.substr(3, 2).c_str(), nullptr, 16)));
      }
      // UNUSED / UNDEFINED tokens (and BYTE in BPE) render as nothing.
    }
  }

  // lstrip/rstrip are not stored in GGUF; llama.cpp sets them from the model name.
  void strip_attrs() {
    const std::string name = lower(f.get_string("general.name", ""));
    const std::string arch = f.get_string("general.architecture", "");
    auto contains = [](const std::string& s, std::initializer_list<const char*> subs) {
      for (const char* x : subs)
        if (s.find(x) != std::string::npos) return true;
      return false;
    };
    auto set = [&](const char* t, uint32_t bit, bool on) {
      if (int32_t id = v.find(t); id != kNoToken) v.attr[id] = on ? (v.attr[id] | bit) : (v.attr[id] & ~bit);
    };
    if (contains(v.pre_name, {"jina-v2-de", "jina-v2-es", "jina-v2-code"}) ||
        contains(arch, {"nomic-bert-moe", "jina-bert-v3"})) {
      set("<mask>", ATTR_LSTRIP, true);
    } else if (contains(name, {"phi-3", "phi3"})) {
      for (int32_t id : v.special_tokens) v.attr[id] |= ATTR_RSTRIP;
      set("</s>", ATTR_RSTRIP, true);
      for (const char* t : {"<unk>", "<s>", "<|endoftext|>"}) set(t, ATTR_RSTRIP, false);
    } else if (contains(name, {"modern-bert"})) {
      set("[MASK]", ATTR_LSTRIP, true);
    }
  }
};

std::shared_ptr<const Vocab> Vocab::load(const GGUFFile& f) {
  auto v = std::make_shared<Vocab>();
  VocabLoader L{f, *v};
  L.type_and_flags();
  L.tokens();
  L.merges();
  L.special_ids();
  L.byte_tokens();
  L.detect_by_text();
  L.eog_set();
  L.special_list();
  L.pieces();
  L.strip_attrs();
  return v;
}

bool Vocab::is_eog(int32_t id) const { return std::binary_search(eog.begin(), eog.end(), id); }

void Vocab::check_id(int32_t id, const char* op) const {
  if (id < 0 || static_cast<size_t>(id) >= text.size())
    throw Error("tokenizer", "bad_token", strfmt("%s: token id %d out of range (vocabulary has %zu tokens)", op, id,
                                                 text.size()));
}

const std::string& Vocab::token_text(int32_t id) const {
  check_id(id, "token_text");
  return text[id];
}

int32_t Vocab::merge_rank_by_text(std::string_view left, std::string_view right) const {
  if (merges_by_text.empty()) return -1;
  auto it = merges_by_text.find(merge_key(left, right));
  return it == merges_by_text.end() ? -1 : it->second;
}

}  // namespace gaacrt::tok
