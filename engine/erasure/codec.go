package erasure

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/klauspost/reedsolomon"
	"github.com/strata-storage/strata/engine/objlayer"
)

// BlockWriter receives one shard's blocks in order (drive.BitrotWriter).
type BlockWriter interface {
	WriteBlock(block []byte) error
}

// BlockReader returns a shard's block i, verified (drive.BitrotReader).
type BlockReader interface {
	ReadBlock(i int) ([]byte, error)
}

// Costs of reading a shard, from a BlockReader's optional ReadCost method;
// readers without one cost costMemory.
const (
	costMemory = iota // the shard is in memory (an inline record)
	costDrive         // a file on a drive of this node
	costPeer          // a file on another node: one round trip per block
	costSlow          // a drive much slower than its set's others (slow.go)
)

type readCoster interface {
	ReadCost() int
}

func costOf(r BlockReader) int {
	if c, ok := r.(readCoster); ok {
		return c.ReadCost()
	}
	return costMemory
}

// Codec stripes objects over the shards of a layout, block by block: each
// block of BlockSize object bytes becomes Data shards of ShardBlockSize bytes
// plus Parity shards computed with Reed-Solomon.
type Codec struct {
	layout    Layout
	blockSize int
	rs        reedsolomon.Encoder
	// blocks recycles block buffers: a fresh 1 MiB buffer per PUT costs more
	// than encoding a small object. Each has room for the parity shards
	// after the block, so encoding one allocates nothing.
	blocks sync.Pool
	// shardBufs recycles the read buffers of shard readers (a shard block
	// plus its checksum).
	shardBufs sync.Pool
	// made counts the block buffers allocated (blocks.New).
	made atomic.Int64
}

// NewCodec returns a codec for layout with blocks of blockSize object bytes.
func NewCodec(l Layout, blockSize int) (*Codec, error) {
	if blockSize < l.Data {
		return nil, fmt.Errorf("erasure: block size %d is smaller than %d data shards", blockSize, l.Data)
	}
	rs, err := reedsolomon.New(l.Data, l.Parity)
	if err != nil {
		return nil, fmt.Errorf("erasure: %w", err)
	}
	c := &Codec{layout: l, blockSize: blockSize, rs: rs}
	c.blocks.New = func() any {
		c.made.Add(1)
		b := make([]byte, blockSize, l.SetSize()*c.ShardBlockSize())
		return &b
	}
	c.shardBufs.New = func() any { return make([]byte, 0, c.ShardBlockSize()+4) }
	return c, nil
}

// Layout is the codec's shape.
func (c *Codec) Layout() Layout { return c.layout }

// BlockSize is the object bytes per block.
func (c *Codec) BlockSize() int { return c.blockSize }

// ShardBlockSize is the bytes each shard holds per full block.
func (c *Codec) ShardBlockSize() int { return ceilDiv(c.blockSize, c.layout.Data) }

// ShardSize is the bytes of shard data (before bitrot framing) each shard
// holds for an object of size bytes.
func (c *Codec) ShardSize(size int64) int64 {
	full := size / int64(c.blockSize)
	last := int(size % int64(c.blockSize))
	return full*int64(c.ShardBlockSize()) + int64(ceilDiv(last, c.layout.Data))
}

// EncodeBlock splits block (at most BlockSize bytes) into data and parity
// shards. The returned shards alias block, and its spare capacity when it
// has room for the parity (which is allocated otherwise).
func (c *Codec) EncodeBlock(block []byte) ([][]byte, error) {
	if len(block) == 0 || len(block) > c.blockSize {
		return nil, fmt.Errorf("erasure: block of %d bytes (want 1..%d)", len(block), c.blockSize)
	}
	shards, err := c.split(block)
	if err != nil {
		return nil, err
	}
	if err := c.rs.Encode(shards); err != nil {
		return nil, err
	}
	return shards, nil
}

// split cuts block into its shards in place when its capacity holds the
// parity: only the last data shard's padding is cleared, as the parity is
// computed over whatever is there (reedsolomon's Split clears all of the
// spare capacity, a block's worth of memory writes per block). Without the
// room it is Split's.
func (c *Codec) split(block []byte) ([][]byte, error) {
	per := ceilDiv(len(block), c.layout.Data)
	total := c.layout.SetSize() * per
	if cap(block) < total {
		return c.rs.Split(block)
	}
	all := block[:total]
	clear(all[len(block) : c.layout.Data*per])
	shards := make([][]byte, c.layout.SetSize())
	for i := range shards {
		shards[i] = all[i*per : (i+1)*per : (i+1)*per]
	}
	return shards, nil
}

// Encode reads r to EOF and writes shard i of every block to writers[i]
// (in parallel, see encode). A writer that fails is dropped and its error
// recorded in errs[i]; the encode goes on while at least writeQuorum
// writers remain, and fails with ErrWriteQuorum otherwise. It waits for
// every writer and returns the object bytes read.
func (c *Codec) Encode(r io.Reader, writers []BlockWriter, writeQuorum int) (n int64, errs []error, err error) {
	if len(writers) != c.layout.SetSize() {
		return 0, nil, fmt.Errorf("erasure: %d writers for a set of %d", len(writers), c.layout.SetSize())
	}
	return c.encode(firstBlock{}, r, writers, writeQuorum, nil, nil, nil)
}

// Decode writes bytes [offset, offset+length) of an object of size bytes to
// w, reading only the blocks that cover the range. readers[i] reads shard i
// (nil when the shard is missing). Data shards are read first; a shard that
// is missing or fails its checksum is rebuilt from parity. Decode returns the
// shards it found bad, for healing, and ErrReadQuorum when fewer than Data
// shards of a block could be read.
func (c *Codec) Decode(w io.Writer, readers []BlockReader, offset, length, size int64) (bad []int, err error) {
	if offset < 0 || length < 0 || offset+length > size {
		return nil, fmt.Errorf("erasure: range %d+%d outside an object of %d bytes", offset, length, size)
	}
	if len(readers) != c.layout.SetSize() {
		return nil, fmt.Errorf("erasure: %d readers for a set of %d", len(readers), c.layout.SetSize())
	}
	if length == 0 {
		return nil, nil
	}
	failed := make([]bool, len(readers))
	for i, r := range readers {
		failed[i] = r == nil
	}
	shards := make([][]byte, len(readers))
	// Cheapest shards first, data before parity at equal cost: a block
	// read from this node's drives plus parity reconstruction costs less
	// than a round trip to a peer for a data shard.
	order := make([]int, len(readers))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Compare(costOf(readers[a]), costOf(readers[b]))
	})
	first := offset / int64(c.blockSize)
	last := (offset + length - 1) / int64(c.blockSize)
	for b := first; b <= last; b++ {
		blockLen := int(min(int64(c.blockSize), size-b*int64(c.blockSize)))
		if err := c.readBlock(readers, order, int(b), shards, failed); err != nil {
			return failedList(failed), err
		}
		// Only data shards are needed to cut the range out of the block.
		shardLen := ceilDiv(blockLen, c.layout.Data)
		from := int64(0)
		if b == first {
			from = offset - b*int64(c.blockSize)
		}
		to := int64(blockLen)
		if b == last {
			to = offset + length - b*int64(c.blockSize)
		}
		if err := writeRange(w, shards[:c.layout.Data], shardLen, from, to); err != nil {
			return failedList(failed), err
		}
	}
	return failedList(failed), nil
}

// readBlock fills shards with block b's data shards, reading shards in
// the given order (cheapest first) and reconstructing the data shards not
// read or found missing or corrupt.
func (c *Codec) readBlock(readers []BlockReader, order []int, b int, shards [][]byte, failed []bool) error {
	for i := range shards {
		shards[i] = nil
	}
	// Each round reads as many more shards as are still missing.
	have, next := 0, 0
	var batch []int
	var errs []error
	for have < c.layout.Data {
		batch = batch[:0]
		for ; next < len(order) && len(batch) < c.layout.Data-have; next++ {
			if i := order[next]; !failed[i] {
				batch = append(batch, i)
			}
		}
		if len(batch) == 0 {
			break
		}
		if errs == nil {
			errs = make([]error, len(readers))
		}
		readShards(readers, b, batch, shards, errs)
		for _, i := range batch {
			if errs[i] != nil {
				failed[i] = true
				shards[i] = nil
				continue
			}
			have++
		}
	}
	if have < c.layout.Data {
		return fmt.Errorf("%w: %d of %d shards of block %d readable, %d needed",
			objlayer.ErrReadQuorum, have, len(readers), b, c.layout.Data)
	}
	for i := 0; i < c.layout.Data; i++ {
		if shards[i] == nil {
			return c.rs.ReconstructData(shards)
		}
	}
	return nil
}

// readShards reads block b of the listed shards, in parallel when their
// readers wait on I/O. Each reader has a buffer of its own that stays valid
// until its next block: no copy is needed while the others are read.
func readShards(readers []BlockReader, b int, list []int, shards [][]byte, errs []error) {
	parallel := len(list) > 1
	for _, i := range list {
		if costOf(readers[i]) == costMemory {
			parallel = false
			break
		}
	}
	if !parallel {
		for _, i := range list {
			shards[i], errs[i] = readers[i].ReadBlock(b)
		}
		return
	}
	var wg sync.WaitGroup
	for _, i := range list[1:] {
		wg.Go(func() { shards[i], errs[i] = readers[i].ReadBlock(b) })
	}
	i := list[0]
	shards[i], errs[i] = readers[i].ReadBlock(b)
	wg.Wait()
}

// writeRange writes bytes [from, to) of a block whose data shards are given.
func writeRange(w io.Writer, data [][]byte, shardLen int, from, to int64) error {
	for i, s := range data {
		start, end := int64(i*shardLen), int64((i+1)*shardLen)
		if end <= from || start >= to {
			continue
		}
		lo, hi := max(from, start)-start, min(to, end)-start
		if _, err := w.Write(s[lo:hi]); err != nil {
			return err
		}
	}
	return nil
}

func failedList(failed []bool) []int {
	var out []int
	for i, f := range failed {
		if f {
			out = append(out, i)
		}
	}
	return out
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
