package drive

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// Shard data is stored in blocks, each preceded by the CRC32C of its bytes:
//
//	[crc 4 bytes LE][block 0] [crc][block 1] ... [crc][last block, maybe short]
//
// Every read verifies the blocks it touches, so corruption is detected on the
// read that meets it, and a range read touches only its own blocks. The same
// framing is used for shard files and for inline shards in version records.

// BitrotChecksumSize is the bytes of checksum per block.
const BitrotChecksumSize = 4

// ErrBitrot means a block's bytes do not match their checksum.
var ErrBitrot = errors.New("bitrot: block checksum mismatch")

// BitrotSize is the stored size of shardSize bytes of shard data cut into
// blocks of blockSize.
func BitrotSize(shardSize int64, blockSize int) int64 {
	if shardSize <= 0 {
		return 0
	}
	blocks := (shardSize + int64(blockSize) - 1) / int64(blockSize)
	return shardSize + blocks*BitrotChecksumSize
}

// BitrotWriter frames blocks written to an underlying writer.
type BitrotWriter struct {
	w       io.Writer
	scratch [BitrotChecksumSize]byte
	written int64
}

// NewBitrotWriter returns a writer of checksummed blocks.
func NewBitrotWriter(w io.Writer) *BitrotWriter { return &BitrotWriter{w: w} }

// WriteBlock writes one block with its checksum. Every block but the last of
// a shard must have the shard's block size.
func (b *BitrotWriter) WriteBlock(block []byte) error {
	binary.LittleEndian.PutUint32(b.scratch[:], crc32.Checksum(block, castagnoli))
	if _, err := b.w.Write(b.scratch[:]); err != nil {
		return err
	}
	if _, err := b.w.Write(block); err != nil {
		return err
	}
	b.written += int64(len(block)) + BitrotChecksumSize
	return nil
}

// Written is the number of bytes written, checksums included.
func (b *BitrotWriter) Written() int64 { return b.written }

// AppendBitrot frames data as blocks, appending to dst (for inline shards).
func AppendBitrot(dst, data []byte, blockSize int) []byte {
	for len(data) > 0 {
		n := min(blockSize, len(data))
		dst = binary.LittleEndian.AppendUint32(dst, crc32.Checksum(data[:n], castagnoli))
		dst = append(dst, data[:n]...)
		data = data[n:]
	}
	return dst
}

// BitrotReader reads and verifies blocks of a framed shard.
type BitrotReader struct {
	r         io.ReaderAt
	shardSize int64
	blockSize int
	buf       []byte
}

// NewBitrotReader reads a framed shard holding shardSize bytes of data in
// blocks of blockSize.
func NewBitrotReader(r io.ReaderAt, shardSize int64, blockSize int) *BitrotReader {
	return &BitrotReader{r: r, shardSize: shardSize, blockSize: blockSize}
}

// NewBitrotReaderBuf is NewBitrotReader reading into buf (at least
// blockSize+BitrotChecksumSize bytes, or it grows), so a caller can reuse
// buffers across reads.
func NewBitrotReaderBuf(r io.ReaderAt, shardSize int64, blockSize int, buf []byte) *BitrotReader {
	return &BitrotReader{r: r, shardSize: shardSize, blockSize: blockSize, buf: buf}
}

// Buffer returns the reader's buffer (to give back to a pool).
func (b *BitrotReader) Buffer() []byte { return b.buf }

// Blocks is the number of blocks in the shard.
func (b *BitrotReader) Blocks() int {
	return int((b.shardSize + int64(b.blockSize) - 1) / int64(b.blockSize))
}

// ReadBlock returns block i, verified. The slice is valid until the next call.
func (b *BitrotReader) ReadBlock(i int) ([]byte, error) {
	if i < 0 || i >= b.Blocks() {
		return nil, fmt.Errorf("bitrot: block %d outside a shard of %d blocks", i, b.Blocks())
	}
	n := b.blockSize
	if last := b.shardSize - int64(i)*int64(b.blockSize); last < int64(n) {
		n = int(last)
	}
	need := n + BitrotChecksumSize
	if cap(b.buf) < need {
		b.buf = make([]byte, need)
	}
	buf := b.buf[:need]
	off := int64(i) * int64(b.blockSize+BitrotChecksumSize)
	if _, err := b.r.ReadAt(buf, off); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: block %d truncated", ErrBitrot, i)
		}
		return nil, err
	}
	if crc32.Checksum(buf[BitrotChecksumSize:], castagnoli) != binary.LittleEndian.Uint32(buf) {
		return nil, fmt.Errorf("%w: block %d", ErrBitrot, i)
	}
	return buf[BitrotChecksumSize:], nil
}
