"""TeX math (``<math>`` contents) as readable plain text: ``\\frac{n!}{k!}`` -> ``(n!)/(k!)``.

Pages keep their formulas as something a reader (and a search index) can use, instead of
raw TeX or a hole in the sentence. The conversion is a fixed number of regular-expression
passes, each linear in its input; nesting deeper than the pass count is left as it is.
"""

from __future__ import annotations

import re

_SYMBOLS = {
    "alpha": "α", "beta": "β", "gamma": "γ", "delta": "δ", "epsilon": "ε", "varepsilon": "ε", "zeta": "ζ",
    "eta": "η", "theta": "θ", "vartheta": "θ", "iota": "ι", "kappa": "κ", "lambda": "λ", "mu": "μ", "nu": "ν",
    "xi": "ξ", "pi": "π", "rho": "ρ", "sigma": "σ", "tau": "τ", "upsilon": "υ", "phi": "φ", "varphi": "φ",
    "chi": "χ", "psi": "ψ", "omega": "ω", "Gamma": "Γ", "Delta": "Δ", "Theta": "Θ", "Lambda": "Λ", "Xi": "Ξ",
    "Pi": "Π", "Sigma": "Σ", "Phi": "Φ", "Psi": "Ψ", "Omega": "Ω",
    "cdot": "·", "times": "×", "div": "÷", "pm": "±", "mp": "∓", "le": "≤", "leq": "≤", "ge": "≥", "geq": "≥",
    "ne": "≠", "neq": "≠", "approx": "≈", "sim": "~", "equiv": "≡", "propto": "∝", "infty": "∞",
    "to": "→", "rightarrow": "→", "leftarrow": "←", "Rightarrow": "⇒", "iff": "⇔", "in": "∈", "notin": "∉",
    "subset": "⊂", "subseteq": "⊆", "cup": "∪", "cap": "∩", "emptyset": "∅", "forall": "∀", "exists": "∃",
    "partial": "∂", "nabla": "∇", "sum": "∑", "prod": "∏", "int": "∫", "ldots": "…", "cdots": "⋯", "dots": "…",
    "circ": "∘", "degree": "°", "hbar": "ħ", "ell": "ℓ", "prime": "′", "angle": "∠", "perp": "⊥",
    "sin": "sin", "cos": "cos", "tan": "tan", "log": "log", "ln": "ln", "exp": "exp", "lim": "lim",
    "max": "max", "min": "min", "det": "det", "gcd": "gcd", "mod": "mod", "bmod": "mod",
}
_SPACING = re.compile(r"\\[,;:! ]|~|\\quad|\\qquad")
_DROP = re.compile(r"\\(?:displaystyle|textstyle|scriptstyle|left|right|big|Big|bigg|Bigg)\b")
_STYLED = re.compile(r"\\(?:mathrm|mathbf|mathit|mathsf|mathtt|mathcal|mathbb|mathfrak|text|textrm|textbf|"
                     r"textit|operatorname|boldsymbol|vec|hat|bar|tilde|overline|underline)\s*\{([^{}]*)\}")
_FRAC = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_SQRT = re.compile(r"\\sqrt\s*(?:\[([^\]{}]*)\])?\s*\{([^{}]*)\}")
_SCRIPT = re.compile(r"([\^_])\{([^{}]*)\}")
_COMMAND = re.compile(r"\\([A-Za-z]+)")
_BRACES = re.compile(r"[{}]")
_SPACES = re.compile(r"\s+")
_PASSES = 3


def _short(text: str) -> str:
    return text if len(text) <= 1 or text.isalnum() else f"({text})"


def tex_to_text(tex: str) -> str:
    """Readable text for a TeX formula (symbols as Unicode, fractions as ``(a)/(b)``)."""
    text = _DROP.sub("", _SPACING.sub(" ", tex))
    for _ in range(_PASSES):  # innermost groups first; each pass removes one level of nesting
        text = _STYLED.sub(r"\1", text)
        text = _FRAC.sub(lambda m: f"{_short(m.group(1).strip())}/{_short(m.group(2).strip())}", text)
        text = _SQRT.sub(lambda m: (f"{m.group(1)}√" if m.group(1) else "√") + _short(m.group(2).strip()), text)
        text = _SCRIPT.sub(lambda m: m.group(1) + _short(m.group(2).strip()), text)
    text = _COMMAND.sub(lambda m: _SYMBOLS.get(m.group(1), m.group(1)), text)
    return _SPACES.sub(" ", _BRACES.sub("", text)).strip()
