"""Small PDF files made in the test: pages that draw text with the standard Helvetica font,
built from pypdf's own objects so the file's structure (xref, lengths) is always right."""

from __future__ import annotations

from io import BytesIO

from pypdf import PdfReader, PdfWriter
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

# A character map for font /F2: code 01 is 🙂 (a surrogate pair in the map), 02 is 東, 03 is
# 語; what a PDF made from a document in any script holds.
_MAP = b"""/CIDInit /ProcSet findresource begin
12 dict begin
begincmap
/CMapName /Test def
1 begincodespacerange
<00> <FF>
endcodespacerange
3 beginbfchar
<01> <D83DDE42>
<02> <6771>
<03> <8A9E>
endbfchar
endcmap
CMapName currentdict /CMap defineresource pop
end
end"""


def _name(text: str) -> NameObject:
    return NameObject(f"/{text}")


def _stream(writer: PdfWriter, data: bytes) -> object:
    stream = DecodedStreamObject()
    stream.set_data(data)
    return writer._add_object(stream)


def _fonts(writer: PdfWriter) -> DictionaryObject:
    """/F1: Helvetica in Windows' Latin encoding (é, ï); /F2: Helvetica with the map above."""
    latin = DictionaryObject(
        {
            _name("Type"): _name("Font"),
            _name("Subtype"): _name("Type1"),
            _name("BaseFont"): _name("Helvetica"),
            _name("Encoding"): _name("WinAnsiEncoding"),
        }
    )
    mapped = DictionaryObject(
        {
            _name("Type"): _name("Font"),
            _name("Subtype"): _name("Type1"),
            _name("BaseFont"): _name("Helvetica"),
            _name("ToUnicode"): _stream(writer, _MAP),
        }
    )
    return DictionaryObject({_name("F1"): writer._add_object(latin), _name("F2"): mapped})


def pdf_bytes(*pages: bytes) -> bytes:
    """A PDF whose pages run the content streams ``pages`` (b"" for a blank page), e.g.
    ``b"BT /F1 12 Tf 72 720 Td (Caf\\xe9) Tj ET"``."""
    writer = PdfWriter()
    for content in pages:
        page = writer.add_blank_page(612, 792)
        page[_name("Resources")] = DictionaryObject({_name("Font"): _fonts(writer)})
        page[_name("Contents")] = _stream(writer, content)
    out = BytesIO()
    writer.write(out)
    return out.getvalue()


def encrypted(data: bytes, password: str) -> bytes:
    """The PDF ``data`` encrypted with the user password ``password`` (RC4: no extra package)."""
    writer = PdfWriter(clone_from=PdfReader(BytesIO(data)))
    writer.encrypt(password, algorithm="RC4-128")
    out = BytesIO()
    writer.write(out)
    return out.getvalue()
