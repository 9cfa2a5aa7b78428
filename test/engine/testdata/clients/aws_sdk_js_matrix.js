// The AWS SDK for JavaScript v3 scenario of TestClientMatrix
// (test/engine/clientmatrix_test.go): the calls a Node application makes,
// with the client at its defaults (flexible checksums: CRC32 in trailers of
// aws-chunked uploads, response checksums validated) but retries off, the
// CA bundle trusted and path-style addressing. Credentials and region come
// from the environment. Prints one JSON object: {"requests": N, "ops":
// {...}, "checks": N, "failures": [...], "http_errors": [...]}.
//
// Installed by `make jsclients` (bin/node-clients; the Go test sets
// NODE_PATH to its node_modules).

"use strict";

const crypto = require("node:crypto");
const fs = require("node:fs");
const https = require("node:https");
const { Readable } = require("node:stream");
const { parseArgs } = require("node:util");

const {
  S3Client,
  CreateBucketCommand,
  PutObjectCommand,
  GetObjectCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  CopyObjectCommand,
  GetObjectAttributesCommand,
  CreateMultipartUploadCommand,
  UploadPartCommand,
  ListPartsCommand,
  CompleteMultipartUploadCommand,
  DeleteObjectsCommand,
  DeleteBucketCommand,
} = require("@aws-sdk/client-s3");
const { Upload } = require("@aws-sdk/lib-storage");

const { values: args } = parseArgs({
  options: { endpoint: { type: "string" }, bucket: { type: "string" }, ca: { type: "string" } },
});
for (const name of ["endpoint", "bucket", "ca"]) {
  if (!args[name]) {
    console.error(`--${name} is required`);
    process.exit(2);
  }
}
const bucket = args.bucket;

const out = { requests: 0, ops: {}, payloads: {}, checks: 0, failures: [], http_errors: [] };

const client = new S3Client({
  endpoint: args.endpoint,
  forcePathStyle: true,
  maxAttempts: 1,
  requestHandler: { httpsAgent: new https.Agent({ ca: fs.readFileSync(args.ca), keepAlive: true }) },
});

// Every HTTP exchange is counted by operation; an error answer is kept
// with the operation that got it.
client.middlewareStack.add(
  (next, context) => async (input) => {
    out.requests++;
    // How the body was sent: its hash, UNSIGNED-PAYLOAD, or aws-chunked
    // with a trailer (STREAMING-UNSIGNED-PAYLOAD-TRAILER).
    const sha = input.request.headers["x-amz-content-sha256"] || "";
    const payload = /^[0-9a-f]{64}$/.test(sha) ? "hash" : sha;
    out.payloads[payload] = (out.payloads[payload] || 0) + 1;
    let status;
    try {
      const result = await next(input);
      status = result.response && result.response.statusCode;
      return result;
    } catch (e) {
      status = (e.$metadata && e.$metadata.httpStatusCode) || `${e.name}: ${e.message}`;
      throw e;
    } finally {
      if (typeof status === "number" && status < 400) {
        out.ops[context.commandName] = (out.ops[context.commandName] || 0) + 1;
      } else {
        out.http_errors.push({ op: context.commandName, status });
      }
    }
  },
  { step: "deserialize", name: "strataTally" },
);

function check(ok, what) {
  if (ok) {
    out.checks++;
  } else {
    out.failures.push({ what, error: "check failed" });
  }
}

// step runs one part of the scenario; an exception fails it, not the rest.
async function step(what, fn) {
  try {
    await fn();
  } catch (e) {
    out.failures.push({ what, error: `${e.name || "Error"}: ${e.message}` });
  }
}

const sha256 = (b) => crypto.createHash("sha256").update(b).digest("hex");
const md5 = (b) => crypto.createHash("md5").update(b).digest("hex");
const unquote = (etag) => (etag || "").replace(/"/g, "");

// CRC-32 (IEEE), S3's CRC32, big-endian and base64 as S3 answers it.
const crcTable = Array.from({ length: 256 }, (_, n) => {
  let c = n;
  for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  return c >>> 0;
});
function crc32(b) {
  let c = 0xffffffff;
  for (const x of b) c = crcTable[(c ^ x) & 0xff] ^ (c >>> 8);
  const v = Buffer.alloc(4);
  v.writeUInt32BE((c ^ 0xffffffff) >>> 0);
  return v.toString("base64");
}

async function read(key) {
  const r = await client.send(new GetObjectCommand({ Bucket: bucket, Key: key }));
  return Buffer.from(await r.Body.transformToByteArray());
}

async function main() {
  const small = crypto.randomBytes(10 << 10);
  const streamed = crypto.randomBytes((1 << 20) + 3);
  const big = crypto.randomBytes((20 << 20) + 7); // 5 parts of lib-storage's 5 MiB
  const parts = [crypto.randomBytes(5 << 20), crypto.randomBytes(1000)];
  const written = new Map();

  await step("CreateBucket", () => client.send(new CreateBucketCommand({ Bucket: bucket })));

  await step("PutObject", async () => {
    const r = await client.send(new PutObjectCommand({ Bucket: bucket, Key: "small.bin", Body: small }));
    check(unquote(r.ETag) === md5(small), `PutObject ETag ${r.ETag}, want the MD5 ${md5(small)}`);
    check(r.ChecksumCRC32 === crc32(small), `PutObject CRC32 ${r.ChecksumCRC32}, want ${crc32(small)} (the SDK's default checksum)`);
    written.set("small.bin", small);
  });

  // A stream goes aws-chunked, its checksum in a trailer.
  await step("PutObject (stream)", async () => {
    const r = await client.send(new PutObjectCommand({
      Bucket: bucket, Key: "stream.bin", Body: Readable.from([streamed.subarray(0, 100000), streamed.subarray(100000)]), ContentLength: streamed.length,
    }));
    check(r.ChecksumCRC32 === crc32(streamed), `PutObject of a stream: CRC32 ${r.ChecksumCRC32}, want ${crc32(streamed)}`);
    written.set("stream.bin", streamed);
  });

  await step("Upload (lib-storage, 20 MiB)", async () => {
    await new Upload({ client, params: { Bucket: bucket, Key: "big/20MiB.bin", Body: big } }).done();
    written.set("big/20MiB.bin", big);
  });

  await step("HeadObject", async () => {
    const h = await client.send(new HeadObjectCommand({ Bucket: bucket, Key: "big/20MiB.bin" }));
    check(h.ContentLength === big.length, `HEAD of the upload: ${h.ContentLength} bytes, want ${big.length}`);
    check(unquote(h.ETag).endsWith("-5"), `HEAD of the upload: ETag ${h.ETag}, want 5 parts`);
  });

  await step("GetObject", async () => {
    for (const [key, data] of written) {
      const got = await read(key);
      check(got.length === data.length && sha256(got) === sha256(data), `GET ${key}: ${got.length} bytes, not the ${data.length} written`);
    }
  });

  await step("CopyObject", async () => {
    await client.send(new CopyObjectCommand({ Bucket: bucket, Key: "copy/small.bin", CopySource: `${bucket}/small.bin` }));
    const got = await read("copy/small.bin");
    check(sha256(got) === sha256(small), `GET of the copy: ${got.length} bytes, not the ${small.length} copied`);
    written.set("copy/small.bin", small);
  });

  // The SDK sends the attributes as one header, "ETag, Checksum, ...".
  await step("GetObjectAttributes", async () => {
    const a = await client.send(new GetObjectAttributesCommand({
      Bucket: bucket, Key: "small.bin", ObjectAttributes: ["ETag", "Checksum", "ObjectSize", "StorageClass"],
    }));
    check(a.ETag === md5(small) && a.ObjectSize === small.length && a.StorageClass === "STANDARD",
      `attributes of small.bin: ETag ${a.ETag}, ObjectSize ${a.ObjectSize}, StorageClass ${a.StorageClass}`);
    check(a.Checksum && a.Checksum.ChecksumCRC32 === crc32(small), `attributes of small.bin: checksum ${JSON.stringify(a.Checksum)}, want CRC32 ${crc32(small)}`);
    check(a.LastModified instanceof Date && !isNaN(a.LastModified), `attributes of small.bin: LastModified ${a.LastModified}`);
    const m = await client.send(new GetObjectAttributesCommand({
      Bucket: bucket, Key: "big/20MiB.bin", ObjectAttributes: ["ObjectParts", "ObjectSize"],
    }));
    check(m.ObjectSize === big.length && m.ObjectParts && m.ObjectParts.TotalPartsCount === 5,
      `attributes of the upload: ObjectSize ${m.ObjectSize}, parts ${JSON.stringify(m.ObjectParts)}`);
  });

  await step("multipart upload", async () => {
    const key = "mp/explicit.bin";
    const up = await client.send(new CreateMultipartUploadCommand({ Bucket: bucket, Key: key }));
    const done = [];
    for (const [i, p] of parts.entries()) {
      const r = await client.send(new UploadPartCommand({ Bucket: bucket, Key: key, UploadId: up.UploadId, PartNumber: i + 1, Body: p }));
      check(unquote(r.ETag) === md5(p), `part ${i + 1}: ETag ${r.ETag}, want ${md5(p)}`);
      done.push({ PartNumber: i + 1, ETag: r.ETag });
    }
    const l = await client.send(new ListPartsCommand({ Bucket: bucket, Key: key, UploadId: up.UploadId }));
    check((l.Parts || []).length === 2 && l.Parts[1].Size === parts[1].length, `ListParts: ${JSON.stringify(l.Parts)}`);
    await client.send(new CompleteMultipartUploadCommand({ Bucket: bucket, Key: key, UploadId: up.UploadId, MultipartUpload: { Parts: done } }));
    const got = await read(key);
    const whole = Buffer.concat(parts);
    check(sha256(got) === sha256(whole), `GET of the completed upload: ${got.length} bytes, not the ${whole.length} uploaded`);
    written.set(key, whole);
  });

  // A paginated listing, two keys a page.
  await step("ListObjectsV2", async () => {
    const listed = [];
    let token;
    do {
      const l = await client.send(new ListObjectsV2Command({ Bucket: bucket, MaxKeys: 2, ContinuationToken: token }));
      for (const o of l.Contents || []) {
        listed.push(o.Key);
        check(o.Size === written.get(o.Key)?.length, `listed ${o.Key} with ${o.Size} bytes`);
      }
      token = l.IsTruncated ? l.NextContinuationToken : undefined;
    } while (token);
    const want = [...written.keys()].sort();
    check(JSON.stringify(listed) === JSON.stringify(want), `listed ${JSON.stringify(listed)}, want ${JSON.stringify(want)}`);
  });

  await step("DeleteObjects", async () => {
    const keys = [...written.keys()];
    const r = await client.send(new DeleteObjectsCommand({ Bucket: bucket, Delete: { Objects: keys.map((Key) => ({ Key })) } }));
    check((r.Deleted || []).length === keys.length && !(r.Errors || []).length, `DeleteObjects: ${JSON.stringify(r.Deleted)} ${JSON.stringify(r.Errors)}`);
    const l = await client.send(new ListObjectsV2Command({ Bucket: bucket }));
    check(!(l.Contents || []).length, `objects left after DeleteObjects: ${JSON.stringify(l.Contents)}`);
  });

  await step("DeleteBucket", () => client.send(new DeleteBucketCommand({ Bucket: bucket })));
}

main().then(
  () => console.log(JSON.stringify(out)),
  (e) => {
    out.failures.push({ what: "scenario", error: String(e && e.stack) });
    console.log(JSON.stringify(out));
  },
);
