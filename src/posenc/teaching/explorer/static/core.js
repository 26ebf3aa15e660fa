// Shared machinery of the explorer page: the RoPE settings every view uses, requests to the
// server's JSON API, the one registry and loader of workbench views and lesson chapters, the one resize
// mechanism, and the workbench's router.

import { fmt } from "./charts.js";
import { ROLE_COLOURS, SCALING_COLOURS, SCHEME_COLOURS, SERIES_COLOURS } from "./palette.js";

export const $ = (id) => document.getElementById(id);
// Short names of the palette's colours for the workbench views (every colour is palette.js's).
export const COLORS = {
  q: ROLE_COLOURS.query, k: ROLE_COLOURS.key, rope: SCHEME_COLOURS.rope, sinusoidal: SCHEME_COLOURS.sinusoidal,
  default: SCALING_COLOURS.default,  // plain RoPE among the scalings: the rope colour, as in the lesson
};
export const PALETTE = SERIES_COLOURS;

// -- shared state: the RoPE settings every view uses -------------------------------------------------
export const rope = { headDim: 16, base: 10000 };
// `params` holds one value per parameter of the registered scalings, by its name (factor, beta_fast,
// ...): the wavelength view makes their sliders from GET /api/scalings, and every request sends them
// under those names.
export const scaling = { trainLen: 8192, seqLen: 32768, params: {} };
// The rotation pair picked on a clock dial; the wavelength and precision views mark it too.
export const focus = { pair: null };

// -- talking to the server ------------------------------------------------------------------------------
// The registered RoPE scalings (label, colour, parameters with their ranges, flags), fetched once: the
// wavelength and copy-as-config views build their sliders, checkboxes, options and colours from it.
let scalingsRequest = null;
export function scalingTypes() {
  if (!scalingsRequest) {
    scalingsRequest = api("/api/scalings").then((d) => d.scalings).catch((err) => { scalingsRequest = null; throw err; });
  }
  return scalingsRequest;
}

export async function api(path, params = {}, signal = undefined) {
  const url = new URL(path, window.location.origin);
  for (const [key, value] of Object.entries(params)) url.searchParams.set(key, String(value));
  const response = await fetch(url, { signal });
  let body = null;
  try { body = await response.json(); } catch (err) { body = null; }
  if (!response.ok) {
    const detail = body && body.detail ? body.detail : `${response.status} ${response.statusText}`;
    throw new Error(typeof detail === "string" ? detail : JSON.stringify(detail));
  }
  return body;
}

// -- one registry and one loader for workbench views and lesson chapters --------------------------------
// A panel is a workbench view (<section id="view-NAME">) or a lesson chapter (<article id="ch-NAME">).
// Both register here under their name, load through `loader` (which counts renders on the panel as
// data-renders and shows errors in its first error box) and redraw through `onResize` below.
export const registry = Object.create(null);

export function panel(name) {
  return document.getElementById(`view-${name}`) || document.getElementById(`ch-${name}`);
}

// Registers a panel. A view gives `refresh(wait)` (called when it is shown stale, and again after the
// shared RoPE settings change if `usesRope`); a chapter gives `setup()`, run the first time it is shown,
// which wires its controls and returns the `redraw()` its resizes call (or null).
export function register(name, { refresh = null, setup = null, usesRope = false } = {}) {
  const node = panel(name);
  if (!node) throw new Error(`register: no panel named ${JSON.stringify(name)} on the page`);
  if (name in registry) throw new Error(`register: ${JSON.stringify(name)} is registered twice`);
  if (!refresh === !setup) throw new Error(`register: ${JSON.stringify(name)} needs one of refresh (a view) or setup (a chapter)`);
  registry[name] = { name, node, refresh, setup, usesRope, stale: true, ready: false, redraw: null };
}

export const isView = (name) => name in registry && registry[name].refresh !== null;
export const isRegisteredChapter = (name) => name in registry && registry[name].setup !== null;

// While a panel shows an error it is marked data-failed (style.css dims its figures): they were drawn for
// the last input that worked, not for the one the error is about.
export function showError(name, message, selector = ".error") {
  const box = panel(name).querySelector(selector);
  if (!box) return;
  box.textContent = message;
  box.hidden = false;
  panel(name).dataset.failed = "true";
}

export function clearError(name, selector = ".error") {
  const box = panel(name).querySelector(selector);
  if (!box) return;
  box.hidden = true;
  box.textContent = "";
  delete panel(name).dataset.failed;
}

export function rendered(name) {
  const node = panel(name);
  node.dataset.renders = String(Number(node.dataset.renders || 0) + 1);
}

// How many of a panel's loaders have been asked and not yet drawn (data-pending): a loader counts from the
// moment it is asked (a debounce waiting counts) until its answer is drawn or its error shown, so
// data-pending="0" says that everything the panel was asked for is on the page.
function pending(name, change) {
  const node = panel(name);
  node.dataset.pending = String(Math.max(0, Number(node.dataset.pending || 0) + change));
}

// A panel's loader: debounces, cancels the request it supersedes, counts the panel's renders and the
// loaders in flight, and reports errors in it. `frames` are the elements the loader draws in: the
// data-ready of each is "false" from the moment the loader is asked, "true" once the answer is drawn
// and "error" when the error box shows why not (tests wait on it, never on the clock).
export function loader(name, load, { delay = 70, selector = ".error", frames = [] } = {}) {
  let timer = null, controller = null, asked = false;
  const mark = (state) => { for (const frame of frames) frame.dataset.ready = state; };
  const settle = (state) => {
    if (asked) { asked = false; pending(name, -1); }
    mark(state);
  };
  return function schedule(wait = delay) {
    clearTimeout(timer);
    if (!asked) { asked = true; pending(name, 1); }
    mark("false");
    timer = setTimeout(async () => {
      if (controller) controller.abort();
      controller = new AbortController();
      const mine = controller;
      try {
        await load(mine.signal);
        if (mine.signal.aborted) return;  // a later request superseded it; that one settles
        clearError(name, selector);
        rendered(name);
        settle("true");
      } catch (err) {
        if (err.name === "AbortError") return;
        showError(name, err.message, selector);
        settle("error");
      }
    }, wait);
  };
}

// -- one figure of a lesson chapter: controls -> request -> draw -> text ----------------------------------
// A chapter script defines each of its figures once, as data, and `figure` does the wiring every figure
// shares: it reads the controls, asks the figure's route (through the chapter's loader, which debounces,
// cancels a superseded request, counts renders and shows errors), draws, and fills in the text.
//   route     the figure's API path ("/api/lesson/alibi"); or
//   request   async (params, signal) => data, for a figure that asks more than one route
//   controls  request parameter -> its control: a slider's id (a string; its <output> shows its value),
//             range(id, { transform, format, wait }) for a slider that maps its value, choice(id) for a
//             <select> or a box read on "change", typed(id, read) for text read as it is typed
//   params    (values) => the request's parameters, from the controls' values at each request (default:
//             the values as they are)
//   prepare   (data) => data, reshaped once it arrives (optional)
//   draw      (data) => draws the figure at its width; run again on every resize (optional)
//   fill      (data) => writes what is drawn once per answer: its numbers, tables, status (optional)
//   start     false: the chapter calls `load(0)` itself, when what the figure needs is ready
//   frame     the id of the element it draws in, for a figure without controls (default: the <figure>s that
//             hold its controls); their data-ready says when the figure has drawn its answer
// Returns { load, redraw, data }: load(wait) asks again, redraw() draws the last answer again.
const CONTROL_KINDS = { slider: "input", choice: "change", typed: "input" };

export const range = (id, { transform = Number, format = String, wait = undefined } = {}) =>
  ({ kind: "slider", id, transform, format, wait });
export const choice = (id, read = (node) => node.value) => ({ kind: "choice", id, read, wait: 0 });
export const typed = (id, read = (node) => node.value, wait = 300) => ({ kind: "typed", id, read, wait });

function control(name, spec) {
  const given = typeof spec === "string" ? { kind: "slider", id: spec } : spec;
  if (!given || !(given.kind in CONTROL_KINDS) || typeof given.id !== "string") {
    throw new Error(`figure: control ${JSON.stringify(name)} must be a slider's id, range(), choice() or typed(), `
      + `got ${JSON.stringify(spec)}`);
  }
  if (!$(given.id)) throw new Error(`figure: control ${JSON.stringify(name)} names no element: #${given.id}`);
  return given;
}

export function figure(chapter, { route = null, request = null, controls = {}, params = null, prepare = null, draw = null,
  fill = null, start = true, frame = null } = {}) {
  if (!route === !request) throw new Error(`figure in ${JSON.stringify(chapter)}: give one of route or request`);
  let data = null;
  const readers = {};
  const specs = Object.entries(controls).map(([name, spec]) => [name, control(name, spec)]);
  // the <figure> frames it draws in: the one named, or those that hold its controls
  const frames = frame ? [$(frame)] : [...new Set(specs.map(([, c]) => $(c.id).closest("figure")).filter(Boolean))];
  const load = loader(chapter, async (signal) => {
    const read = Object.fromEntries(Object.entries(readers).map(([name, reader]) => [name, reader()]));
    const values = params ? params(read) : read;
    let answer = route ? await api(route, values, signal) : await request(values, signal);
    if (signal.aborted) return;
    if (prepare) answer = prepare(answer) ?? answer;
    data = answer;
    if (draw) draw(data);
    if (fill) fill(data);
  }, { frames });
  for (const [name, c] of specs) {
    if (c.kind === "slider") {
      readers[name] = slider(c.id, () => load(c.wait), c.transform || Number, c.format || String);
    } else {
      const node = $(c.id);
      node.addEventListener(CONTROL_KINDS[c.kind], () => load(c.wait));
      readers[name] = () => c.read(node);
    }
  }
  const redraw = () => { if (data && draw) draw(data); };
  if (start) load(0);
  return { load, redraw, data: () => data };
}

// The figures of one chapter: each figure's unit, and the chapter's redraw (every figure's).
export function figures(chapter, ...specs) {
  const units = specs.map((spec) => figure(chapter, spec));
  return { units, redraw: () => units.forEach((unit) => unit.redraw()) };
}

// -- a lesson chapter's markup: its text places and its figures' frames ------------------------------------
// A chapter script builds its `markup` from these, so every figure has the one frame the lesson's styles,
// its prose (a caption fills the figure's <figcaption data-prose>) and its tests expect:
//   <figure class="lesson-fig" aria-labelledby="NAME-caption">
//     before · <div class="controls">controls</div> · the error box (error: true) · a note <p id=note> ·
//     body · <figcaption id="NAME-caption" data-prose="NAME-caption"> · after ·
//     <div class="numbers" id=numbers> (numbers: true names it NAME-numbers)
//   </figure>
// Each part but the body and the caption is optional; controls are strings, made by the helpers below.
const attributeText = (value) => String(value).replaceAll("&", "&amp;").replaceAll("\"", "&quot;");

// ` a="1" b` from { a: 1, b: true, c: null }: in the object's order, true as a bare name, null/false/undefined left out
export function attributesHtml(attributes) {
  return Object.entries(attributes).filter(([, v]) => v !== undefined && v !== null && v !== false)
    .map(([k, v]) => (v === true ? ` ${k}` : ` ${k}="${attributeText(v)}"`)).join("");
}

// The places a chapter's text fills, one <div class="prose" data-prose="SLOT"> per slot.
export const proseHtml = (...slots) => slots.map((slot) => `<div class="prose" data-prose="${slot}"></div>`).join("\n");

export const errorHtml = `<div class="error" role="alert" hidden></div>`;

export function figureHtml(name, { before = "", controls = [], error = false, note = null, body, after = "", numbers = null }) {
  const numbersId = numbers === true ? `${name}-numbers` : numbers;
  return [
    `<figure class="lesson-fig" aria-labelledby="${name}-caption">`,
    before,
    controls.length ? `<div class="controls">\n${controls.join("\n")}\n</div>` : "",
    error ? errorHtml : "",
    note ? `<p class="note" id="${note}" aria-live="polite"></p>` : "",
    body,
    `<figcaption id="${name}-caption" data-prose="${name}-caption"></figcaption>`,
    after,
    numbersId ? `<div class="numbers" id="${numbersId}" aria-live="polite"></div>` : "",
    "</figure>",
  ].filter(Boolean).join("\n");
}

// A control with its label: `<label>LABEL <input ...>AFTER</label>` (wide: the label takes a row of its own).
export function inputHtml(label, attributes, { wide = false, after = "" } = {}) {
  return `<label${wide ? ` class="wide"` : ""}>${label} <input${attributesHtml(attributes)}>${after}</label>`;
}

// A slider and the <output> that shows its value (core.js `slider` keeps it up to date); `unit` follows it.
// `scaling` names the scaling parameter whose range it takes (see scalingParamRanges), `shows` the value
// shown before the first update.
export function sliderHtml(label, id, { min, max, step, value, scaling, primary = false, shows = value, unit = "" } = {}) {
  const attributes = { type: "range", id, min, max, step, value, "data-scaling-param": scaling, "data-primary": primary };
  return inputHtml(label, attributes, { after: `<output id="${id}-out">${shows}</output>${unit ? ` ${unit}` : ""}` });
}

// A menu: each option is its text (the value is the text) or [value, text]; `selected` is the chosen value.
export function menuHtml(label, id, options, { selected = null, primary = false } = {}) {
  const items = options.map((option) => {
    const [value, shown] = Array.isArray(option) ? option : [null, option];
    return `<option${attributesHtml({ value, selected: (value ?? shown) === selected })}>${shown}</option>`;
  });
  return `<label>${label} <select${attributesHtml({ id, "data-primary": primary })}>${items.join("")}</select></label>`;
}

// The position schemes as a menu offers them, in the lesson's order.
export const SCHEME_OPTIONS = [["nope", "none (NoPE)"], ["sinusoidal", "sinusoidal"], ["learned", "learned table"],
  ["rope", "RoPE"], ["alibi", "ALiBi"]];

// Slider <-> output wiring; `transform` maps the slider's value to the value used.
export function slider(id, onChange, transform = Number, format = String) {
  const input = $(id), out = $(`${id}-out`) || $(id.replace(/-log$/, "") + "-out");
  const read = () => transform(Number(input.value));
  const update = () => { if (out) out.textContent = format(read()); };
  input.addEventListener("input", () => { update(); onChange(read()); });
  update();
  return read;
}

// One slider per scaling parameter, each shared by the types that name it, in `box`; `onChange(name,
// value)` runs on every move. Sets scaling.params to the defaults first.
export function scalingSliders(box, types, onChange) {
  box.replaceChildren();
  const seen = new Set();
  for (const t of types) {
    for (const p of t.parameters) {
      if (seen.has(p.name)) continue;
      seen.add(p.name);
      const id = `wl-param-${p.name}`;
      const label = document.createElement("label");
      label.append(`${p.label} `);
      const input = Object.assign(document.createElement("input"),
        { type: "range", id, min: p.minimum, max: p.maximum, step: p.step, value: p.default });
      input.dataset.param = p.name;
      const out = Object.assign(document.createElement("output"), { id: `${id}-out` });
      label.append(input, out);
      box.append(label);
      scaling.params[p.name] = slider(id, (v) => { scaling.params[p.name] = v; onChange(p.name, v); })();
    }
  }
}

// Sliders elsewhere on the page that set a scaling parameter (`<input data-scaling-param="factor">`)
// take its range, step and default from the registry, so a range is defined once, by the descriptor.
// The page does this before it shows any panel, so no figure reads such a slider before it is set.
export async function scalingParamRanges(root = document) {
  const inputs = [...root.querySelectorAll("input[data-scaling-param]")];
  if (!inputs.length) return;
  const defined = Object.fromEntries((await scalingTypes()).flatMap((t) => t.parameters).map((p) => [p.name, p]));
  for (const input of inputs) {
    const p = defined[input.dataset.scalingParam];
    if (!p) throw new Error(`no registered scaling has a parameter ${JSON.stringify(input.dataset.scalingParam)}`);
    Object.assign(input, { min: p.minimum, max: p.maximum, step: p.step, value: p.default });
  }
}

// The lesson's manifest (GET /api/lesson/chapters: its chapters, and its figure ranges as `limits`,
// name -> {minimum, maximum, default, help}), fetched once for the page and every chapter that reads it.
let lessonManifestPromise = null;
export function lessonManifest() {
  if (!lessonManifestPromise) {
    lessonManifestPromise = api("/api/lesson/chapters")
      .catch((err) => { lessonManifestPromise = null; throw err; });
  }
  return lessonManifestPromise;
}

export const pow2 = (v) => Math.round(2 ** v);
export const pow10 = (v) => Number((10 ** v).toPrecision(3));

export function escapeText(text) {
  const node = document.createElement("span");
  node.textContent = text;
  return node.innerHTML;
}

export function valueSpan(id, value, digits = 6, extra = "") {
  return `<span id="${id}" class="num" data-value="${value}"${extra}>${fmt(value, digits)}</span>`;
}

// -- resizing --------------------------------------------------------------------------------------------
// The page's one resize mechanism, for workbench views and lesson chapters alike: `onResize(node,
// draw)` redraws `node`'s figures at their panel's new width after the window stops changing width.
// A node that is hidden then (another view, another chapter) is redrawn when it is shown again
// (`showResized`), so no chart is ever left at a width it no longer has.
const resizers = [];
let resizeTimer = null;

function onScreen(node) { return node.isConnected && node.closest("[hidden]") === null; }

function redraw(entry) {
  entry.width = window.innerWidth;
  entry.draw();
}

export function onResize(node, draw) {
  resizers.push({ node, draw, width: window.innerWidth });
  if (resizers.length === 1) {
    window.addEventListener("resize", () => {
      clearTimeout(resizeTimer);
      resizeTimer = setTimeout(() => {
        for (const entry of resizers) if (entry.width !== window.innerWidth && onScreen(entry.node)) redraw(entry);
      }, 150);
    });
  }
}

// Redraws the figures registered on `node` (or inside it) that were drawn at another window width, or
// while hidden (charts.js widthOf marks a holder it could not measure data-unsized).
export function showResized(node) {
  for (const entry of resizers) {
    const stale = entry.width !== window.innerWidth || entry.node.querySelector("[data-unsized]") !== null;
    if ((entry.node === node || node.contains(entry.node)) && stale && onScreen(entry.node)) {
      redraw(entry);
    }
  }
}

// -- router (workbench views) ---------------------------------------------------------------------------
let active = null;

export function show(name) {
  if (!isView(name)) name = "fingerprint";
  for (const node of document.querySelectorAll(".view")) node.hidden = node.id !== `view-${name}`;
  for (const link of document.querySelectorAll(".tabs a")) link.classList.toggle("active", link.dataset.view === name);
  active = name;
  const view = registry[name];
  if (view.stale) { view.stale = false; view.refresh(0); } else showResized(view.node);
}

export function invalidateAll() {
  for (const entry of Object.values(registry)) {
    if (entry.usesRope) entry.stale = true;
  }
  if (active && registry[active].stale) { registry[active].stale = false; registry[active].refresh(); }
}

// -- global settings -----------------------------------------------------------------------------------------
export function setupGlobal() {
  const headDim = $("g-head-dim"), baseLog = $("g-base-log"), base = $("g-base");
  headDim.addEventListener("change", () => { rope.headDim = Number(headDim.value); invalidateAll(); });
  baseLog.addEventListener("input", () => {
    rope.base = pow10(Number(baseLog.value));
    base.value = rope.base;
    invalidateAll();
  });
  base.addEventListener("change", () => {
    const value = Number(base.value);
    rope.base = value;
    if (value > 0) baseLog.value = Math.log10(value);
    invalidateAll();
  });
  $("rope-settings").addEventListener("submit", (event) => event.preventDefault());
}
