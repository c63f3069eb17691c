"""LineRelay over real pipes: framing edge cases."""
import os
import threading

from smtrain.proc.streams import LineRelay, TailBuffer


def _relay(chunks: list[bytes], max_line: int = 1 << 20) -> tuple[bytes, bytes]:
    src_r, src_w = os.pipe()
    dst_r, dst_w = os.pipe()
    tail = TailBuffer(16)
    relay = LineRelay(src_r, dst_w, tail, threading.Lock(), max_line=max_line).start()
    received = bytearray()

    def read_all() -> None:
        while chunk := os.read(dst_r, 65536):
            received.extend(chunk)

    reader = threading.Thread(target=read_all)
    reader.start()
    for chunk in chunks:
        os.write(src_w, chunk)
    os.close(src_w)
    assert relay.join(5)
    os.close(dst_w)
    reader.join(5)
    return bytes(received), tail.get()


def test_lines_split_across_writes_and_utf8_split_mid_character() -> None:
    text = "héllo wörld\nsecond\n".encode()
    out, _ = _relay([text[:2], text[2:9], text[9:]])
    assert out == text


def test_missing_final_newline_gets_one() -> None:
    assert _relay([b"a\nb"])[0] == b"a\nb\n"


def test_carriage_returns_pass_through() -> None:
    assert _relay([b"50%\r100%\r\n"])[0] == b"50%\r100%\r\n"


def test_overlong_line_is_passed_on_in_pieces() -> None:
    out, tail = _relay([b"x" * 5000, b"y\n"], max_line=1024)
    assert out == b"x" * 5000 + b"y\n"
    assert tail == (b"x" * 5000 + b"y\n")[-16:]
