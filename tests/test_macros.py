"""Offer URL macros: substitution, encoding, date formats and the rule that visitors never change the host."""

from __future__ import annotations

import datetime
from urllib.parse import quote, urlsplit

import pytest

from models.routing.macros import MACRO_NAMES, MacroError, UrlTemplate, compile_url, saved_url

NOW = datetime.datetime(2024, 3, 5, 7, 8, 9, 123456)  # a Tuesday, naive UTC

PLAIN_NAMES = sorted(MACRO_NAMES - {"random"})

HOSTILE_VALUES = [
    "//evil.com",
    "@evil.com",
    "\r\nLocation: x",
    "../../",
    "%2F%2F",
    "\\evil",
    ".evil.com",
    ":8080@evil.com/",
    "https://evil.com/",
    "#frag?q=1&x=2",
    "\u202eevil\u3002com",
    "\ud800",
]

# Every place a macro may legally sit; "{m}" is replaced by the macro under test.
MACRO_POSITIONS = [
    "https://example.com/{m}",
    "https://example.com/{m}/rest",
    "https://example.com/a{m}b",
    "https://example.com?{m}",
    "https://example.com/?x={m}",
    "https://example.com/?{m}=1",
    "https://example.com#{m}",
    "https://example.com/p#a={m}",
    "http://user:pw@example.com:8080/{m}",
]


def render_one(name: str, value: str) -> str:
    return compile_url(f"https://example.com/?v={{{name}}}").render({name: value}, NOW)


# --- substitution -----------------------------------------------------------------------------------------


def test_every_plain_macro_is_substituted_with_its_value() -> None:
    source = "https://example.com/go?" + "&".join(f"{name}={{{name}}}" for name in PLAIN_NAMES)
    values = {name: f"v-{name}" for name in PLAIN_NAMES}

    url = compile_url(source).render(values, NOW)

    assert url == "https://example.com/go?" + "&".join(f"{name}=v-{name}" for name in PLAIN_NAMES)


def test_macro_names_cover_the_documented_keitaro_set() -> None:
    expected = {"subid", "campaign_id", "campaign_name", "stream_id", "offer_id", "ip", "user_agent"}
    expected |= {"referrer", "source", "external_id", "cost", "random", "keyword"}
    expected |= {"country", "region", "city", "device_type", "os", "browser", "language"}
    expected |= {f"sub_id_{n}" for n in range(1, 31)}
    assert MACRO_NAMES == expected


def test_missing_or_none_value_renders_empty() -> None:
    template = compile_url("https://example.com/?a={subid}&b={sub_id_1}&c={cost}")
    values: dict = {"subid": None}
    assert template.render(values, NOW) == "https://example.com/?a=&b=&c="


def test_non_string_value_is_rendered_with_str() -> None:
    template = compile_url("https://example.com/?c={cost}&o={offer_id}")
    values: dict = {"cost": 0, "offer_id": 17}
    assert template.render(values, NOW) == "https://example.com/?c=0&o=17"


def test_macro_names_are_case_insensitive_and_reported_lowercase() -> None:
    template = compile_url("https://example.com/{SubID}/{SUB_ID_2}?t={Date:Y}&r={RANDOM}")

    url = template.render({"subid": "abc", "sub_id_2": "x"}, NOW)

    assert template.macros == frozenset({"subid", "sub_id_2", "date", "random"})
    assert url.startswith("https://example.com/abc/x?t=2024&r=")


def test_macros_property_reports_date_macros_as_date() -> None:
    template = compile_url("https://example.com/{date:Y}/{date:m}/{subid}")
    assert template.macros == frozenset({"date", "subid"})


def test_template_without_macros_renders_unchanged() -> None:
    source = "https://example.com/path?x=1#top"
    template = compile_url(source)
    assert template.render({"subid": "x"}, NOW) == source
    assert template.macros == frozenset()


def test_repeated_macro_is_substituted_everywhere() -> None:
    template = compile_url("https://example.com/{subid}?again={subid}")
    assert template.render({"subid": "s1"}, NOW) == "https://example.com/s1?again=s1"


def test_templates_compare_by_source_and_are_immutable() -> None:
    assert compile_url("https://example.com/{subid}") == UrlTemplate("https://example.com/{subid}")
    with pytest.raises(AttributeError):
        compile_url("https://example.com/").source = "https://evil.com/"  # type: ignore[misc]


# --- encoding ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        ("a\r\nb", "a%0D%0Ab"),
        ("a&b=c", "a%26b%3Dc"),
        ("a/b", "a%2Fb"),
        ("x?y#z", "x%3Fy%23z"),
        ("user@host:80", "user%40host%3A80"),
        ("100%", "100%25"),
        ("%2F", "%252F"),
        ("two words+", "two%20words%2B"),
        ("привет", "%D0%BF%D1%80%D0%B8%D0%B2%D0%B5%D1%82"),
        ("日本😀", "%E6%97%A5%E6%9C%AC%F0%9F%98%80"),
        ("Az09-._~", "Az09-._~"),
        ("", ""),
    ],
)
def test_values_are_percent_encoded(value: str, encoded: str) -> None:
    assert render_one("sub_id_1", value) == f"https://example.com/?v={encoded}"


def test_encoding_matches_urllib_quote_with_nothing_safe() -> None:
    corpus = [chr(code) for code in range(1, 256)]
    corpus += [
        "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0",
        "https://ref.example/p?a=1&b=2#f",
        "ÄÖÜ ß € \u2028 \ufeff",
        "".join(chr(code) for code in range(32, 127)),
    ]
    for value in corpus:
        assert render_one("user_agent", value) == "https://example.com/?v=" + quote(value, safe="")


def test_lone_surrogate_value_is_encoded_not_raised() -> None:
    assert render_one("sub_id_1", "a\ud800b") == "https://example.com/?v=a%ED%A0%80b"


# --- date and random ---------------------------------------------------------------------------------------


def test_date_macro_formats_now_php_style() -> None:
    template = compile_url("https://example.com/?t={date:Y-m-d H:i:s}")
    assert template.render({}, NOW) == "https://example.com/?t=2024-03-05%2007%3A08%3A09"


@pytest.mark.parametrize(
    ("date_format", "expected"),
    [
        ("Y", "2024"),
        ("y", "24"),
        ("m", "03"),
        ("n", "3"),
        ("d", "05"),
        ("j", "5"),
        ("H", "07"),
        ("G", "7"),
        ("i", "08"),
        ("s", "09"),
        ("U", "1709622489"),
        ("D", "Tue"),
        ("l", "Tuesday"),
        ("M", "Mar"),
        ("F", "March"),
        ("N", "2"),
        ("w", "2"),
        ("z", "64"),
        ("W", "10"),
        ("t", "31"),
        ("L", "1"),
        ("o", "2024"),
        ("S", "th"),
        ("jS", "5th"),
        ("a", "am"),
        ("A", "AM"),
        ("g", "7"),
        ("h", "07"),
        ("u", "123456"),
        ("v", "123"),
        ("O", "+0000"),
        ("P", "+00:00"),
        ("p", "Z"),
        ("Z", "0"),
        ("T", "UTC"),
        ("e", "UTC"),
        ("I", "0"),
        ("B", "338"),
        ("c", "2024-03-05T07:08:09+00:00"),
        ("r", "Tue, 05 Mar 2024 07:08:09 +0000"),
        ("Ymd", "20240305"),
        ("\\Y\\m", "Ym"),
        ("\\\\Y", "\\2024"),
        ("Y\\", "2024\\"),
        ("Y_Q_K", "2024_Q_K"),
    ],
)
def test_date_macro_supports_php_letters_and_backslash_escapes(date_format: str, expected: str) -> None:
    template = compile_url(f"https://example.com/?t={{date:{date_format}}}")
    assert template.render({}, NOW) == "https://example.com/?t=" + quote(expected, safe="")


def test_date_macro_renders_aware_datetime_as_given() -> None:
    kyiv_summer = datetime.timezone(datetime.timedelta(hours=3))
    now = datetime.datetime(2024, 7, 1, 23, 30, 0, tzinfo=kyiv_summer)
    template = compile_url("https://example.com/?t={date:Y-m-d H:i P U}")

    url = template.render({}, now)

    assert url == "https://example.com/?t=" + quote("2024-07-01 23:30 +03:00 1719865800", safe="")


def test_naive_and_utc_aware_now_give_the_same_epoch() -> None:
    template = compile_url("https://example.com/?t={date:U}")
    aware = NOW.replace(tzinfo=datetime.UTC)
    assert template.render({}, NOW) == template.render({}, aware) == "https://example.com/?t=1709622489"


def test_random_is_ten_digits_and_differs_between_renders() -> None:
    template = compile_url("https://example.com/?r={random}")
    numbers = {template.render({"random": "fixed"}, NOW).rpartition("=")[2] for _ in range(20)}

    assert len(numbers) > 1
    assert all(number.isdigit() and len(number) == 10 for number in numbers)


# --- rejected templates -----------------------------------------------------------------------------------


def test_unknown_macro_is_rejected_by_name() -> None:
    with pytest.raises(MacroError, match=r"Unknown macro \{foo\}"):
        compile_url("https://example.com/?x={foo}")


@pytest.mark.parametrize("macro", ["{sub_id_0}", "{sub_id_31}", "{subid:x}", "{ subid }", "{geo}"])
def test_near_miss_macro_names_are_rejected(macro: str) -> None:
    with pytest.raises(MacroError, match="Unknown macro"):
        compile_url(f"https://example.com/{macro}")


@pytest.mark.parametrize("source", ["https://example.com/{date}", "https://example.com/{date:}"])
def test_date_macro_without_format_is_rejected(source: str) -> None:
    with pytest.raises(MacroError, match="needs a format"):
        compile_url(source)


@pytest.mark.parametrize(
    "source",
    [
        "https://example.com/{subid",
        "https://example.com/{sub{id}",
        "https://example.com/subid}",
        "https://example.com/{}",
    ],
)
def test_unbalanced_or_empty_braces_are_rejected(source: str) -> None:
    with pytest.raises(MacroError):
        compile_url(source)


@pytest.mark.parametrize(
    "source",
    [
        "https://{subid}/",
        "https://{sub_id_1}.example.com/",
        "https://example.{source}/",
        "https://example.com:{sub_id_1}/",
        "https://{sub_id_1}@example.com/",
        "https://user:{sub_id_1}@example.com/",
        "https://{date:Y/m}.example.com/",
    ],
)
def test_macro_in_host_port_or_userinfo_is_rejected(source: str) -> None:
    with pytest.raises(MacroError, match="not allowed in the scheme or host"):
        compile_url(source)


@pytest.mark.parametrize("source", ["{source}://example.com/", "http{sub_id_1}://example.com/", "{subid}"])
def test_macro_in_scheme_is_rejected(source: str) -> None:
    with pytest.raises(MacroError, match="scheme"):
        compile_url(source)


@pytest.mark.parametrize(
    "source",
    ["https://example.com{sub_id_1}", "https://example.com{sub_id_1}/path", "http://example.com:80{ip}"],
)
def test_macro_directly_after_host_is_rejected(source: str) -> None:
    with pytest.raises(MacroError, match=r"end the host with '/', '\?' or '#'"):
        compile_url(source)


@pytest.mark.parametrize("char", ["\r", "\n", "\t", "\x00", "\x1b", "\x7f", "\x85", "\u2028"])
def test_control_characters_are_rejected_anywhere(char: str) -> None:
    for source in (f"https://exa{char}mple.com/", f"https://example.com/a{char}b", f"https://x.com/{char}"):
        with pytest.raises(MacroError, match="control character"):
            compile_url(source)


@pytest.mark.parametrize(
    "source",
    [
        "//evil.com/x",
        "javascript:alert(1)//{subid}",
        "https:\\\\evil.com",
        "https:/\\evil.com",
        "https:/evil.com",
        "https:evil.com",
        "https://\\evil.com",
        "https://example.com\\@evil.com/",
        "ftp://example.com/",
        "data:text/html,x",
        "/relative/{subid}",
        " https://example.com/",
        "",
    ],
)
def test_non_http_relative_and_backslash_urls_are_rejected(source: str) -> None:
    with pytest.raises(MacroError):
        compile_url(source)


@pytest.mark.parametrize(
    "source",
    [
        "https:///path",
        "https://?q={subid}",
        "https://user@/path",
        "https://:443/",
        "https://exa mple.com/",
        "https://example.com\u200b/",
        "https://example.com:0/",
        "https://example.com:65536/",
        "https://example.com:http/",
        "https://example.com:/",
        "https://[::1/",
        "https://[::1]x/",
        "https://exa<mple.com/",
    ],
)
def test_empty_or_malformed_authority_is_rejected(source: str) -> None:
    with pytest.raises(MacroError):
        compile_url(source)


@pytest.mark.parametrize(
    "source",
    [
        "https://example.com",
        "HTTP://Example.COM/Path",
        "https://user:pw@example.com:8443/a?b=c#d",
        "http://[2001:db8::1]:8080/{subid}",
        "https://example.com?{subid}",
        "https://example.com#{subid}",
    ],
)
def test_well_formed_templates_are_accepted(source: str) -> None:
    assert compile_url(source).source == source


@pytest.mark.parametrize(
    ("source", "stored"),
    [
        ("https://пример.рф/{subid}", "https://xn--e1afmkfd.xn--p1ai/{subid}"),
        ("https://оffer.example/lp?s={subid}", "https://xn--ffer-45d.example/lp?s={subid}"),  # Cyrillic о
        ("https://example.com/a b/{subid}", "https://example.com/a%20b/{subid}"),
        (
            "https://example.com/цена?q=é #é",
            "https://example.com/%D1%86%D0%B5%D0%BD%D0%B0?q=%C3%A9%20#%C3%A9",
        ),
        ("https://üser@example.com/{date:Y m}ü", "https://%C3%BCser@example.com/{date:Y m}%C3%BC"),
    ],
)
def test_a_template_is_rewritten_as_the_printable_ascii_a_location_header_carries(
    source: str, stored: str
) -> None:
    template = compile_url(source)
    assert template.source == stored
    url = template.render({"subid": "S"}, NOW)
    assert url.isascii() and url.isprintable() and " " not in url, url
    assert saved_url(source) == stored


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("https://example.com/a%00b?s={subid}", "%00"),
        ("https://ex..рф/", "not a valid international domain name"),
        ("https://" + "ф" * 70 + ".com/", "not a valid international domain name"),
    ],
)
def test_an_unusable_url_is_refused_at_save_with_one_sentence(source: str, message: str) -> None:
    with pytest.raises(MacroError, match=message) as caught:
        saved_url(source)
    assert str(caught.value).endswith(".") and "\n" not in str(caught.value)


def test_a_stored_url_with_an_encoded_nul_still_loads() -> None:
    # Refusing it where a worker loads offers would stop an offer that was working before the rule.
    assert compile_url("https://example.com/a%00b").render({}, NOW) == "https://example.com/a%00b"


def test_every_rendered_url_is_printable_ascii_whatever_the_template_and_values() -> None:
    literals = ["", "a b", "é", "цена", "%", "|", "\u00a0", "\ud800", "~!$&'()*+,;=:@"]
    for literal in literals:
        for position in ("/{p}?q={subid}", "/x?{p}={subid}", "/x#{p}{subid}", "/{subid}{p}"):
            template = compile_url("https://пример.рф" + position.replace("{p}", literal))
            for value in HOSTILE_VALUES:
                url = template.render({"subid": value}, NOW)
                assert url.isascii() and url.isprintable() and " " not in url, (literal, position, url)
                assert urlsplit(url).hostname == "xn--e1afmkfd.xn--p1ai", url


def test_macro_error_is_a_value_error_with_one_sentence() -> None:
    with pytest.raises(ValueError) as caught:
        compile_url("https://example.com{sub_id_1}")
    message = str(caught.value)
    assert message.endswith(".") and "\n" not in message and "{sub_id_1}" in message


# --- hostile values never move the redirect -----------------------------------------------------------------


def test_hostile_values_never_change_the_host_in_any_position() -> None:
    for position in MACRO_POSITIONS:
        expected = urlsplit(position)[:2]
        for name in PLAIN_NAMES:
            template = compile_url(position.replace("{m}", f"{{{name}}}"))
            for value in HOSTILE_VALUES:
                url = template.render({name: value}, NOW)
                assert urlsplit(url)[:2] == expected, (position, name, value, url)
                assert not any(char in url for char in "\r\n\t\\ "), url
                assert url.count("@") == position.count("@"), url


def test_all_hostile_values_at_once_never_change_the_host() -> None:
    source = "https://example.com/" + "/".join(f"{{{name}}}" for name in PLAIN_NAMES) + "?q={subid}#{ip}"
    template = compile_url(source)
    for value in HOSTILE_VALUES:
        url = template.render(dict.fromkeys(PLAIN_NAMES, value), NOW)
        assert urlsplit(url).netloc == "example.com"
        assert url.isascii()
