"""The corpus of hard cases for the transliteration tests (a plain module: the tests load it in
this process and in a fresh interpreter without unidecode)."""

FRAGMENTS = {
    "combining": ["can'\u0301t", "I can\u0301not", "Abstai\u0308ned", "I won'\u0300t", "cafe\u0301",
                  "I a\u0301m unable", "don\u0327't", "n\u0303ot allowed"],
    "cjk": ["\u6211\u4e0d\u80fd\u56de\u7b54\u8fd9\u4e2a\u95ee\u9898", "\u62b1\u6b49", "\u7b54\u6848\uff1a\u5f03\u6743",
            "\u65e5\u672c\u8a9e\u306e\u7b54\u3048", "\u3053\u306e\u8cea\u554f\u306b\u306f\u7b54\u3048\u3089\u308c\u307e\u305b\u3093",
            "\uc8c4\uc1a1\ud569\ub2c8\ub2e4", "\u4e2d\u6587\u3002\u8fd9\u662f\u7b54\u6848\u3001\u8c22\u8c22"],
    "cyrillic": ["\u041f\u0440\u0438\u0432\u0435\u0442, \u044d\u0442\u043e \u043e\u0442\u0432\u0435\u0442",
                 "I c\u0430nnot", "\u0410bstained", "n\u043et \u0430llowed", "\u0449\u0451\u0442\u043a\u0430"],
    "greek": ["\u039a\u03b1\u03bb\u03b7\u03bc\u03ad\u03c1\u03b1", "I \u03b1m unable", "\u0391nswer: Abstained",
              "\u03bf\u03c5\u03ba \u03b5\u03c7\u03c9", "\u03a8\u03c5\u03c7\u03ae"],
    "fullwidth": ["\uff29 \uff43\uff41\uff4e\uff4e\uff4f\uff54", "\uff21\uff42\uff53\uff54\uff41\uff49\uff4e\uff45\uff44",
                  "\uff41\uff4e\uff53\uff57\uff45\uff52\uff1a", "\uff11\uff12\uff13"],
    "emoji": ["\U0001f600", "\U0001f645 Abstained", "\U0001f44d\U0001f3fd", "\u2764\ufe0f",
              "\U0001f468\u200d\U0001f469\u200d\U0001f467", "\U0001f1fa\U0001f1f8"],
    "quotes": ["I can\u2019t", "\u201cAbstained\u201d", "\u2018Answer:\u2019 Abstained", "I\u2019m unable",
               "\u00abnot allowed\u00bb", "won\u2019t \u2014 sorry\u2026", "\u201ehere\u201c", "don\u2032t"],
}
TEMPLATES = [
    "{f}",
    "{f} I cannot answer questions about rivers.",
    "I cannot help with that. However, {f} " + "here is a detailed answer about rivers. " * 2,
    "I cannot help with that, but {f}",
    "Rivers are long. {f} They flow into the sea.",
    "Answer: {f}",
    "**{f}** Abstained",
    "I am not able to provide that. However, {long}",
    "{f}: I must abstain from answering.",
]


def corpus():
    texts = []
    for script, fragments in FRAGMENTS.items():
        for i, fragment in enumerate(fragments):
            # passages of the script after "However": the heuristic's 100- and 300-character windows
            long = " ".join(fragments[(i + k) % len(fragments)] for k in range(1 + i % 6))
            for template in TEMPLATES:
                texts.append(template.format(f=fragment, long=long))
    return texts
