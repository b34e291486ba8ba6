"""Value pools of the demo data (names, cities, products, events, dates) and the held-out split.

The pools are generated from a fixed seed (not the data seed), so every run and the evaluation see the same pools.
They are large and syllable-built so the model has to copy values from the request rather than memorise them.
Every value, and every arithmetic question, is assigned to the train or the held-out split by a hash of its text
(`is_heldout`), so held-out questions are disjoint from training by construction: the evaluation draws names and
cities only from held-out pools and operand pairs only from held-out hashes. Tested by tests/demo/data_test.py.
"""
import hashlib
import random

HELDOUT_PERCENT = 10

_ONSETS = ["b", "br", "c", "ch", "d", "dr", "f", "g", "gr", "h", "j", "k", "kr", "l", "m", "n", "p", "pr", "r",
           "s", "sh", "st", "t", "th", "tr", "v", "w", "z", ""]
_VOWELS = ["a", "e", "i", "o", "u", "ai", "ea", "io", "ou", "y"]
_CODAS = ["", "", "", "n", "r", "l", "s", "m", "th", "nd", "rt", "x"]
_CITY_SUFFIXES = ["", "", "", "ford", "ville", "burg", "ton", "port", "stad", "haven", "field", "mouth", "polis"]
_CITY_PREFIXES = ["", "", "", "", "", "", "New ", "Port ", "San ", "North ", "Lake "]
# Real places, so a demo user asking about Paris meets a familiar name (each still lands in one split by hash).
REAL_CITIES = [
    "Paris", "London", "Tokyo", "Berlin", "Madrid", "Rome", "Lisbon", "Vienna", "Prague", "Warsaw", "Oslo",
    "Stockholm", "Helsinki", "Dublin", "Athens", "Cairo", "Nairobi", "Lagos", "Mumbai", "Delhi", "Beijing",
    "Shanghai", "Seoul", "Bangkok", "Jakarta", "Manila", "Sydney", "Melbourne", "Auckland", "Toronto", "Montreal",
    "Vancouver", "Chicago", "Boston", "Seattle", "Denver", "Austin", "Miami", "Mexico City", "Lima", "Bogota",
    "Santiago", "Buenos Aires", "Sao Paulo", "Istanbul", "Moscow", "Kyiv", "Zurich", "Geneva", "Amsterdam",
    "Brussels", "Copenhagen", "Edinburgh", "Barcelona", "Munich", "Hamburg", "Milan", "Naples", "Osaka", "Kyoto",
    "Hanoi", "Singapore", "Dubai", "Doha", "Tehran", "Karachi", "Dhaka", "Casablanca", "Tunis", "Accra",
    "New York", "Los Angeles", "San Francisco", "Portland", "Phoenix", "Dallas", "Houston", "Atlanta",
]
# Names as people write them, next to the syllable-built ones: the model copies names it has never seen, whatever
# their spelling (each lands in one split by hash, as every value does).
REAL_FIRST = [
    "Mara", "John", "Aisha", "Wei", "Olga", "Pedro", "Fatima", "Hiroshi", "Ingrid", "Kwame", "Lucia", "Rajesh",
    "Sofia", "Tomasz", "Yuki", "Amara", "Bjorn", "Chen", "Dmitri", "Elena", "Farid", "Greta", "Hassan", "Isabel",
    "Jamal", "Katarzyna", "Liam", "Mei", "Nikolai", "Oluwaseun", "Priya", "Quentin", "Rosa", "Santiago", "Tariq",
    "Ursula", "Valentina", "Wojciech", "Xavier", "Yara", "Zoltan", "Anne-Marie", "Jean-Luc", "Maximilian", "Chloe",
    "Noah", "Emma", "Mateo", "Zainab", "Kenji", "Ana", "Luis", "Grace", "Ahmed", "Leila", "Oscar", "Freya", "Ravi",
    "Siobhan", "Thandiwe", "Giulia", "Henrik", "Aleksandra", "Diego", "Nadia", "Samuel", "Beatriz", "Tobias", "Ines",
    "Kofi", "Mariam", "Arjun", "Camille", "Erik", "Lotte", "Marco", "Nour", "Pavel", "Sakura", "Viktor", "Zara",
]
REAL_LAST = [
    "Quillon", "Smith", "Okafor", "Zhang", "Petrova", "Garcia", "Rahman", "Tanaka", "Lindqvist", "Mensah", "Rossi",
    "Patel", "Novak", "Kowalski", "Sato", "Nwosu", "Andersen", "Wang", "Ivanov", "Fernandez", "Haddad", "Schmidt",
    "Ali", "Moreau", "O'Brien", "McAllister", "van der Berg", "de la Cruz", "Nakamura", "Kim", "Nguyen", "Silva",
    "Kaur", "Dubois", "Eriksson", "Horvath", "Jensen", "Kuznetsov", "Lopez", "Muller", "Nielsen", "Ortiz", "Popescu",
    "Quispe", "Reyes", "Sorensen", "Takahashi", "Usman", "Varga", "Wojcik", "Yilmaz", "Zielinski", "Abbott",
    "Brennan", "Castillo", "Delacroix", "Esposito", "Fitzgerald", "Gonzaga", "Hoffmann", "Iyer", "Jovanovic",
    "Kowalczyk", "Larsen", "Mbeki", "Nakashima", "Oyelaran", "Pereira", "Richter", "Stavros", "Thompson", "Ulrich",
]
_ADJECTIVES = ["red", "blue", "green", "black", "white", "silver", "golden", "small", "large", "wireless",
               "wooden", "steel", "ceramic", "leather", "cotton", "glass", "portable", "folding", "electric",
               "vintage", "compact", "heavy", "light", "waterproof", "smart", "classic", "round", "square",
               "striped", "bamboo", "velvet", "rubber", "copper", "digital", "solar", "soft", "quiet", "bright"]
_NOUNS = ["mug", "lamp", "chair", "desk", "keyboard", "mouse", "backpack", "umbrella", "kettle", "notebook",
          "pen", "bottle", "jacket", "scarf", "clock", "speaker", "headphones", "camera", "bicycle", "helmet",
          "blanket", "pillow", "teapot", "vase", "wallet", "watch", "radio", "charger", "cable", "monitor",
          "printer", "tent", "stool", "shelf", "mirror", "basket", "candle", "plate", "bowl", "spoon", "knife",
          "hammer", "drill", "ladder", "rug", "towel", "sofa", "fan", "heater", "guitar", "drum", "violin"]
_EVENT_KINDS = ["concert", "conference", "workshop", "festival", "meetup", "wedding", "exhibition", "lecture",
                "marathon", "hackathon", "book fair", "film screening", "board meeting", "party", "seminar",
                "tournament", "recital", "webinar", "market", "gala"]
_EVENT_TOPICS = ["jazz", "robotics", "poetry", "climate", "chess", "startup", "pottery", "astronomy", "cooking",
                 "design", "history", "music", "science", "gardening", "photography", "dance", "math", "coding"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
_JOBS = ["teacher", "nurse", "engineer", "baker", "pilot", "painter", "farmer", "doctor", "chef", "writer",
         "lawyer", "plumber", "dentist", "architect", "musician", "librarian", "carpenter", "designer", "driver",
         "scientist", "gardener", "tailor", "pharmacist", "photographer", "electrician", "accountant"]


def stable_hash(text):
    return int.from_bytes(hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest(), "little")


def is_heldout(key):
    """Whether a value or question key belongs to the held-out split (HELDOUT_PERCENT of all keys)."""
    return stable_hash(key) % 100 < HELDOUT_PERCENT


RANDOM_LETTER_NAMES = 0.15  # share of training names made of random letters (Pools.person_name)


def random_letter_word(rng):
    """A capitalised word of 3..9 letters drawn uniformly, never one whose text is a held-out value."""
    while True:
        word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 9))).capitalize()
        if not is_heldout(word):
            return word


def _syllable_word(rng, n_syllables):
    parts = [rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(n_syllables)]
    return "".join(parts).capitalize()


def _unique(rng, make, n):
    seen, out = set(), []
    while len(out) < n:
        v = make(rng)
        if 3 <= len(v) <= 14 and v not in seen:
            seen.add(v)
            out.append(v)
    return out


class Pools:
    """Every pool, split into .train and .heldout lists by is_heldout."""

    def __init__(self, seed=20261201):
        rng = random.Random(seed)
        first = _unique(rng, lambda r: _syllable_word(r, r.choice([2, 2, 3])), 6000)
        last = _unique(rng, lambda r: _syllable_word(r, r.choice([2, 3, 3])), 6000)
        # Real-style names a fifth of the time (person_name), so they get their own pools.
        real_first, real_last = list(REAL_FIRST), list(REAL_LAST)
        cities = _unique(rng, lambda r: r.choice(_CITY_PREFIXES) + _syllable_word(r, r.choice([1, 2, 2]))
                         + r.choice(_CITY_SUFFIXES), 5000)
        cities = list(dict.fromkeys(REAL_CITIES + cities))
        products = [f"{a} {n}" for a in _ADJECTIVES for n in _NOUNS]
        events = [f"{t} {k}" for t in _EVENT_TOPICS for k in _EVENT_KINDS]
        self.pools = {}
        for name, values in (("first", first), ("last", last), ("real_first", real_first), ("real_last", real_last),
                             ("city", cities), ("product", products), ("event", events), ("job", _JOBS)):
            train = [v for v in values if not is_heldout(name + ":" + v)]
            held = [v for v in values if is_heldout(name + ":" + v)]
            self.pools[name] = {"train": train, "heldout": held}

    def pick(self, rng, name, split):
        # Jobs are few; both splits draw from all of them (they are never what the evaluation checks).
        if name == "job":
            return rng.choice(self.pools[name]["train"] + self.pools[name]["heldout"])
        return rng.choice(self.pools[name][split])

    def person_name(self, rng, split):
        # Training only: now and then a name of letters drawn at random, so that copying is practised on spellings
        # (and so tokenizer pieces) no pool produces; the held-out draws, and so the evaluation, are unchanged.
        if split == "train" and rng.random() < RANDOM_LETTER_NAMES:
            return random_letter_word(rng) + " " + random_letter_word(rng)
        if rng.random() < 0.2:
            first = self.pick(rng, "real_first" if rng.random() < 0.7 else "first", split)
            return first + " " + self.pick(rng, "real_last" if rng.random() < 0.7 else "last", split)
        return self.pick(rng, "first", split) + " " + self.pick(rng, "last", split)


def random_date(rng):
    """(sentence form, the same text) of a date; dates are copied verbatim into JSON."""
    day, month, year = rng.randint(1, 28), rng.randrange(12), rng.randint(2024, 2031)
    form = rng.random()
    if form < 0.5:
        text = f"{MONTHS[month]} {day}, {year}"
    elif form < 0.8:
        text = f"{year}-{month + 1:02d}-{day:02d}"
    else:
        text = f"{day} {MONTHS[month]} {year}"
    return text
