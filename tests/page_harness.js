// Runs the page's script against a minimal fake DOM; prints what the test checks as JSON.
"use strict";
const fs = require("fs");
const [pagePath, scenarioPath] = process.argv.slice(2);
const page = fs.readFileSync(pagePath, "utf8");
const script = page.split("<script>")[1].split("</script>")[0];
const scenario = JSON.parse(fs.readFileSync(scenarioPath, "utf8"));

class Node {
  constructor(tag) {
    this.tag = tag; this.children = []; this.style = {}; this._text = "";
    this.classList = { items: new Set(), add(c) { this.items.add(c); }, remove(c) { this.items.delete(c); } };
    this.offsetTop = 0; this.offsetHeight = 0; this.clientHeight = 0; this.scrollTop = 0;
  }
  get textContent() { return this.children.length ? this.children.map((c) => c.textContent).join("") : this._text; }
  set textContent(value) { this.children = []; this._text = String(value); }
  append(...nodes) {
    for (const node of nodes) {
      this.children.push(node);
      if (node.id === "answer-mark") { node.offsetTop = scenario.markTop; node.offsetHeight = 20; }
    }
  }
  querySelectorAll() { return this.children; }
  addEventListener() {}
  scrollIntoView() { this.scrolledIntoView = true; this.shownWhenScrolled = document.getElementById("result").style.display; }
}
const elements = {};
global.document = {
  getElementById: (id) => (elements[id] ||= Object.assign(new Node("div"), { id })),
  createElement: (tag) => new Node(tag),
  createTextNode: (text) => Object.assign(new Node("#text"), { _text: text }),
};
elements.highlighted = Object.assign(new Node("div"), { id: "highlighted", clientHeight: 300 });
elements.context = Object.assign(new Node("textarea"), { value: scenario.context });
elements.question = Object.assign(new Node("input"), { value: "Who?" });
elements.topk = Object.assign(new Node("input"), { value: "2" });
const replies = scenario.replies.slice();
const sent = [];
global.fetch = async (url, options) => {
  if (url === "/readyz") return { json: async () => ({ model: "tiny" }) };
  // A server with an index says so here (scenario.model); without one, index is null.
  if (url === "/v1/model") return { json: async () => scenario.model || { index: null } };
  sent.push(JSON.parse(options.body));
  const reply = replies.shift();
  if (reply.network) throw new TypeError("Failed to fetch");
  return { ok: reply.status < 400, status: reply.status, statusText: reply.statusText || "", text: async () => reply.body, json: async () => JSON.parse(reply.body) };
};
const snapshot = () => {
  const box = elements.highlighted;
  return {
    display: document.getElementById("result").style.display || "",
    highlighted: box.textContent, mark: (box.children.find((c) => c.id === "answer-mark") || {}).textContent || null,
    scrollTop: box.scrollTop, boxScrolled: !!box.scrolledIntoView, shownWhenScrolled: box.shownWhenScrolled || null,
    others: elements.others.children.length, answer: elements.answer.textContent,
    score: elements.score.textContent, error: elements.error.textContent,
    ...(scenario.sure ? { sure: elements.sure.textContent } : {}),
    ...(scenario.model ? {
      sent: sent[sent.length - 1], source: elements.source.textContent,
      label: elements["context-label"].textContent, placeholder: elements.context.placeholder,
      markedAt: (box.children.find((c) => c.id === "answer-mark") ? box.children[0].textContent : null),
      nodes: box.children.map((c) => c.tag),
    } : {}),
  };
};
(async () => {
  new Function(script)();
  await new Promise((resolve) => setTimeout(resolve, 0)); // the page has read /v1/model
  const states = [];
  for (let i = 0; i < scenario.replies.length; i++) {
    await elements.ask.onclick();
    states.push(snapshot());
  }
  console.log(JSON.stringify(states));
})();
