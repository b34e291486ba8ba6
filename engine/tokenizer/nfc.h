// NFC normalization (the `tokenizers` "NFC" normalizer) through utf8proc, with a quick check that skips text which
// is already NFC (all of ASCII, and most text in most scripts). Tested in tests/tokenizer/test_nfc.cpp and by the
// differential tests against HF.
#pragma once

#include <string>
#include <string_view>

namespace voltserve::tokenizer {

// True when NFC(text) == text is certain without normalizing (text must be valid UTF-8). May be false for some
// text that is NFC; never true for text that is not.
bool is_nfc_quick(std::string_view text);

// NFC of valid UTF-8 text. Returns false (out unchanged) if utf8proc fails, which valid input does not cause.
bool nfc_normalize(std::string_view text, std::string& out);

}  // namespace voltserve::tokenizer
