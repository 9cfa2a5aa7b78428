package s3api

import (
	"encoding/binary"
	"encoding/xml"
	"hash/crc32"
	"net/http"

	"github.com/strata-storage/strata/engine/s3err"
)

// SelectObjectContent is not implemented. S3 answers a select request with
// an event stream, and clients read its failure from the stream, so the
// answer is a 200 whose stream holds one error event (NotImplemented)
// after the request is authorised and its document checked.

func selectObjectContent(r *request) error {
	body, err := r.document()
	if err != nil {
		return err
	}
	var doc struct {
		XMLName    xml.Name `xml:"SelectObjectContentRequest"`
		Expression string   `xml:"Expression"`
	}
	if xml.Unmarshal(body, &doc) != nil {
		return s3err.MalformedXML
	}
	msg := eventMessage([][2]string{
		{":error-code", s3err.NotImplemented.Code},
		{":error-message", "SelectObjectContent is not implemented."},
		{":message-type", "error"},
	}, nil)
	r.w.Header()["Content-Type"] = []string{"application/octet-stream"}
	r.w.WriteHeader(http.StatusOK)
	_, _ = r.w.Write(msg)
	return nil
}

// eventMessage encodes one message of AWS's event stream: a prelude
// (total and header lengths, and their CRC32), string headers, the
// payload, and the CRC32 of all that.
func eventMessage(headers [][2]string, payload []byte) []byte {
	var hdr []byte
	for _, h := range headers {
		hdr = append(hdr, byte(len(h[0])))
		hdr = append(hdr, h[0]...)
		hdr = append(hdr, 7) // a string value
		hdr = binary.BigEndian.AppendUint16(hdr, uint16(len(h[1])))
		hdr = append(hdr, h[1]...)
	}
	total := 12 + len(hdr) + len(payload) + 4
	msg := make([]byte, 0, total)
	msg = binary.BigEndian.AppendUint32(msg, uint32(total))
	msg = binary.BigEndian.AppendUint32(msg, uint32(len(hdr)))
	msg = binary.BigEndian.AppendUint32(msg, crc32.ChecksumIEEE(msg[:8]))
	msg = append(msg, hdr...)
	msg = append(msg, payload...)
	return binary.BigEndian.AppendUint32(msg, crc32.ChecksumIEEE(msg))
}
