// libFuzzer harness: the refusal phrase matcher (csrc/core/phrase_match.hpp) against a plain
// reference: rapidfuzz's partial_ratio window set (every full-length window, and the prefixes
// and suffixes shorter than the phrase) scored with an O(n m) LCS table, the best phrase being
// the first with the highest score. The kernel prunes windows with an Aho-Corasick automaton
// over phrase blocks and scores them with a bit-parallel LCS; it must decide exactly the same.
// Texts use a small alphabet (with capitals, punctuation, apostrophes and contractions) so that
// near-matches are frequent.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/phrase_match.hpp"
#include "fuzz_input.hpp"

namespace {

using rapidscore::phrases::default_process_ascii;
using rapidscore::phrases::expand_contractions_ascii;
using rapidscore::phrases::FuzzyPhraseMatcher;

std::size_t lcs(const std::string& a, const char* b, std::size_t len) {
    std::vector<std::size_t> prev(len + 1, 0), cur(len + 1, 0);
    for (char x : a) {
        for (std::size_t j = 1; j <= len; ++j)
            cur[j] = x == b[j - 1] ? prev[j - 1] + 1 : std::max(prev[j], cur[j - 1]);
        std::swap(prev, cur);
    }
    return prev[len];
}

double ratio(const std::string& phrase, const char* w, std::size_t len) {
    const std::size_t lensum = phrase.size() + len;
    const std::size_t dist = lensum - 2 * lcs(phrase, w, len);
    return (1.0 - static_cast<double>(dist) / static_cast<double>(lensum)) * 100.0;
}

double partial_ratio(const std::string& phrase, const std::string& text) {
    const std::size_t m = phrase.size(), n = text.size();
    double best = 0.0;
    for (std::size_t i = 0; i + m <= n; ++i) best = std::max(best, ratio(phrase, text.data() + i, m));
    for (std::size_t j = 1; j < m && j <= n; ++j) best = std::max(best, ratio(phrase, text.data(), j));
    for (std::size_t i = n > m ? n - m + 1 : 1; i < n; ++i) best = std::max(best, ratio(phrase, text.data() + i, n - i));
    return best;
}

const char kPhraseAlphabet[] = "abcn ot";
const char* const kTextPieces[] = {"a", "b", "c", "n", "o", "t", " ", "A", "B", "'", ",", "!", "can't", "won't",
                                   "I'm", "dont", "\xc3\xa9"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    fuzz::Input in(data, size);
    const double thresholds[] = {0.5, 0.7, 0.8, 0.9, 0.95};
    const double threshold = thresholds[in.range(0, 4)];
    const int n_phrases = in.range(1, 4);
    std::vector<std::string> phrases;
    std::vector<std::size_t> raw_lengths;
    for (int k = 0; k < n_phrases; ++k) {
        std::string p;
        const int len = in.range(1, 24);
        for (int i = 0; i < len; ++i) p.push_back(kPhraseAlphabet[in.range(0, 6)]);
        // processed phrases have no leading/trailing space
        while (!p.empty() && p.front() == ' ') p.erase(p.begin());
        while (!p.empty() && p.back() == ' ') p.pop_back();
        if (p.empty()) p = "a";
        raw_lengths.push_back(p.size() + static_cast<std::size_t>(in.range(0, 2)));
        phrases.push_back(p);
    }
    const FuzzyPhraseMatcher matcher(phrases, raw_lengths, threshold);
    std::string text;
    const int pieces = in.range(0, 120);
    for (int i = 0; i < pieces; ++i) text += kTextPieces[in.range(0, 16)];
    const auto got = matcher.match(text);

    // Reference decision.
    const bool ascii = std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; });
    const std::string expanded = expand_contractions_ascii(text);
    const std::string proc = default_process_ascii(expanded);
    const std::size_t max_raw = *std::max_element(raw_lengths.begin(), raw_lengths.end());
    std::size_t max_len = 0;
    for (const auto& p : phrases) max_len = std::max(max_len, p.size());
    const bool fallback = !ascii || expanded.size() < max_raw || proc.size() <= max_len;
    if (fallback) {
        if (got.status != rapidscore::phrases::kFallback) fuzz::fail("expected the fallback status");
        return 0;
    }
    if (got.status == rapidscore::phrases::kFallback) fuzz::fail("unexpected fallback");
    double best = -1.0;
    int best_k = -1;
    for (int k = 0; k < n_phrases; ++k) {
        const double score = partial_ratio(phrases[k], proc);
        if (score > best) { best = score; best_k = k; }
    }
    const bool above = best / 100.0 > threshold;
    if (above != (got.status == rapidscore::phrases::kAbove)) fuzz::fail("decision differs from the reference");
    if (above && (got.best_index != best_k || got.best_score != best))
        fuzz::fail("best phrase or score differs from the reference");
    return 0;
}
