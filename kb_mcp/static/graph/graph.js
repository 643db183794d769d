/*
 * kb's knowledge-graph page: reads /api/graph (kb_mcp/pages/graph_data.py), draws it with
 * sigma.js 3 (WebGL) over a graphology multigraph and lays it out with ForceAtlas2 in a web
 * worker (kb_mcp/static/vendor/README.md). Nodes are coloured by entity type and sized by
 * their degree in the whole graph; labels show for hubs until you zoom in.
 *
 * window.kbGraph exposes the state the browser tests and benchmarks/graph_page.py read:
 * ready, loads, firstPaintMs (ms since navigation start when the first graph with nodes was
 * drawn), order() / size(), selected(), nodePosition(key), camera(), renderer(),
 * stopLayout(), layoutRunning().
 */
(function () {
  "use strict";

  var API = "/api/graph";
  var FILTERS = ["doc", "entity_type", "relationship_type"];
  var KNOWN_TYPE_COLOURS = {
    Role: "#1f77b4",
    Organisation: "#d62728",
    Document: "#2ca02c",
    Code: "#9467bd",
    DefinedTerm: "#ff7f0e",
  };
  var OTHER_COLOURS = ["#17becf", "#8c564b", "#e377c2", "#bcbd22", "#7f7f7f", "#393b79"];
  var DIMMED = "#e4e7eb";
  var EDGE_COLOUR = "#b8c0c8";
  var GOLDEN_ANGLE = Math.PI * (3 - Math.sqrt(5));
  var LAYOUT_MIN_MS = 1500;
  var LAYOUT_MAX_MS = 8000;
  var EXPAND_LAYOUT_MS = 1500;
  var LAYOUT_FRAME_MS = 400;
  // ForceAtlas2's pull to the centre: inferSettings' 0.05 let a small piece unconnected to the
  // rest drift off while the rest repelled it, and the view, fitted to every node, left the
  // main piece in a corner; 1 keeps the pieces together (the layout's own default).
  var LAYOUT_GRAVITY = 1;
  var HIDE_ON_MOVE_EDGES = 1000;
  var LABEL_NEIGHBOURS = 40;
  var LABEL_GAP = 3; // px between a node and its label, as sigma's own label drawing
  var HOVER_PADDING = 2; // px of the hover box around the node and its label

  var el = {
    graph: document.getElementById("graph"),
    counts: document.getElementById("counts"),
    truncated: document.getElementById("truncated"),
    message: document.getElementById("message"),
    details: document.getElementById("details"),
    legend: document.getElementById("legend"),
    search: document.getElementById("search"),
    searchInput: document.getElementById("search-input"),
    names: document.getElementById("entity-names"),
    doc: document.getElementById("doc-filter"),
    entityType: document.getElementById("entity-type-filter"),
    relationshipType: document.getElementById("relationship-type-filter"),
    layoutToggle: document.getElementById("layout-toggle"),
  };
  var selects = { doc: el.doc, entity_type: el.entityType, relationship_type: el.relationshipType };

  var graph = null;
  var renderer = null;
  var layout = null;
  var layoutTimer = null;
  var layoutTicker = null;
  var selected = null;
  var view = null; // the last /api/graph body the graph was built from
  var params = readParams();
  var typeColours = {};
  var knownTypes = { entity: {}, relationship: {} };

  var api = {
    ready: false,
    loads: 0,
    firstPaintMs: null,
    order: function () { return graph ? graph.order : 0; },
    size: function () { return graph ? graph.size : 0; },
    selected: function () { return selected; },
    layoutRunning: function () { return Boolean(layout && layout.isRunning()); },
    stopLayout: stopLayout,
    camera: function () { return renderer ? renderer.getCamera() : null; },
    renderer: function () { return renderer; },
    nodePosition: function (key) {
      if (!renderer || !graph.hasNode(key)) return null;
      var point = renderer.graphToViewport(graph.getNodeAttributes(key));
      var box = el.graph.getBoundingClientRect();
      return { x: box.left + point.x, y: box.top + point.y };
    },
  };
  window.kbGraph = api;

  // -- the query ------------------------------------------------------------------------

  function readParams() {
    var search = new URLSearchParams(window.location.search);
    var result = {};
    ["limit", "doc", "entity_type", "relationship_type", "seed", "depth"].forEach(function (name) {
      if (search.get(name)) result[name] = search.get(name);
    });
    return result;
  }

  function apiUrl(query) {
    var url = new URL(API, window.location.origin);
    Object.keys(query).forEach(function (name) {
      if (query[name]) url.searchParams.set(name, query[name]);
    });
    return url;
  }

  function fetchView(query) {
    var request = { headers: { Accept: "application/json" } };
    return fetch(apiUrl(query), request).then(function (response) {
      if (response.ok) return response.json();
      return response.text().then(function (text) {
        throw new Error(text || response.status + " " + response.statusText);
      });
    });
  }

  function showMessage(text) {
    el.message.textContent = text || "";
    el.message.hidden = !text;
  }

  // -- colours, sizes, legend -----------------------------------------------------------

  function colourOf(type) {
    if (!typeColours[type]) {
      var used = Object.keys(typeColours).filter(function (t) { return !KNOWN_TYPE_COLOURS[t]; });
      typeColours[type] =
        KNOWN_TYPE_COLOURS[type] || OTHER_COLOURS[used.length % OTHER_COLOURS.length];
    }
    return typeColours[type];
  }

  function sizeOf(degree, maxDegree) {
    return 3 + 13 * Math.sqrt(degree / Math.max(1, maxDegree));
  }

  function drawLegend() {
    var counts = {};
    graph.forEachNode(function (_, attributes) {
      counts[attributes.entityType] = (counts[attributes.entityType] || 0) + 1;
    });
    el.legend.replaceChildren();
    Object.keys(counts).sort().forEach(function (type) {
      var item = document.createElement("li");
      var swatch = document.createElement("span");
      swatch.className = "swatch";
      swatch.style.background = colourOf(type);
      var label = document.createElement("span");
      label.textContent = type + " (" + counts[type] + ")";
      item.append(swatch, label);
      el.legend.append(item);
    });
  }

  function fillSelect(select, values, current) {
    var keep = select.options[0];
    select.replaceChildren(keep);
    values.forEach(function (entry) {
      var option = document.createElement("option");
      option.value = entry.value;
      option.textContent = entry.label;
      select.append(option);
    });
    select.value = current || "";
  }

  function updateFilters(data) {
    data.nodes.forEach(function (node) { knownTypes.entity[node.type] = true; });
    data.edges.forEach(function (edge) { knownTypes.relationship[edge.type] = true; });
    if (params.entity_type) knownTypes.entity[params.entity_type] = true;
    if (params.relationship_type) knownTypes.relationship[params.relationship_type] = true;
    fillSelect(el.doc, data.documents.map(function (doc) {
      return { value: doc.doc_id, label: doc.name };
    }), data.query.doc);
    var asOptions = function (set) {
      return Object.keys(set).sort().map(function (t) { return { value: t, label: t }; });
    };
    fillSelect(el.entityType, asOptions(knownTypes.entity), params.entity_type);
    fillSelect(el.relationshipType, asOptions(knownTypes.relationship), params.relationship_type);
  }

  function updateNames() {
    var names = [];
    graph.forEachNode(function (_, attributes) { names.push(attributes.label); });
    names.sort();
    el.names.replaceChildren.apply(el.names, names.map(function (name) {
      var option = document.createElement("option");
      option.value = name;
      return option;
    }));
  }

  function plural(count, one, many) {
    return count + " " + (count === 1 ? one : many);
  }

  function updateCounts() {
    var text = plural(graph.order, "entity", "entities") + " · " +
      plural(graph.size, "relationship", "relationships") + " shown";
    if (view && view.truncated) text += " of " + view.total.edges;
    el.counts.textContent = text;
    if (view && view.truncated) {
      el.truncated.textContent = view.query.seed
        ? "Truncated: showing " + view.shown.edges + " of the " + view.total.edges +
          " relationships around " + view.query.seed + " (limit " + view.limit + ")."
        : "Truncated: showing the " + view.shown.edges + " best-connected of " + view.total.edges +
          " relationships (limit " + view.limit + "). Filter by document or type, or search " +
          "an entity, to see the rest.";
      el.truncated.hidden = false;
    } else {
      el.truncated.hidden = true;
    }
  }

  // -- building and drawing -------------------------------------------------------------

  function addData(data, near) {
    var maxDegree = 1;
    data.nodes.forEach(function (node) { maxDegree = Math.max(maxDegree, node.degree); });
    if (graph.order) {
      graph.forEachNode(function (_, a) { maxDegree = Math.max(maxDegree, a.degree); });
    }
    var fresh = data.nodes.filter(function (node) { return !graph.hasNode(node.key); });
    fresh.sort(function (a, b) { return b.degree - a.degree || (a.key < b.key ? -1 : 1); });
    var origin = near && graph.hasNode(near) ? graph.getNodeAttributes(near) : { x: 0, y: 0 };
    var spread = near ? 1 : 10;
    var offset = near ? 1 : 0;
    fresh.forEach(function (node, index) {
      // a phyllotaxis spiral, hubs in the middle: a readable picture before the layout runs
      var radius = spread * Math.sqrt(index + offset);
      var angle = index * GOLDEN_ANGLE;
      graph.addNode(node.key, {
        label: node.name,
        entityType: node.type,
        description: node.description,
        degree: node.degree,
        color: colourOf(node.type),
        x: origin.x + radius * Math.cos(angle),
        y: origin.y + radius * Math.sin(angle),
      });
    });
    graph.forEachNode(function (key, a) {
      graph.setNodeAttribute(key, "size", sizeOf(a.degree, maxDegree));
    });
    data.edges.forEach(function (edge) {
      var known = graph.hasNode(edge.source) && graph.hasNode(edge.target);
      if (!known || graph.hasEdge(edge.id)) return;
      graph.addDirectedEdgeWithKey(edge.id, edge.source, edge.target, {
        relationshipType: edge.type,
        description: edge.description,
        document: edge.document,
        documentName: edge.document_name,
        page: edge.page,
        pageText: edge.page_text,
        chunkId: edge.chunk_id,
        citation: edge.citation,
        color: EDGE_COLOUR,
        size: 1,
      });
    });
  }

  function neighbourhoodOf(key) {
    var set = {};
    set[key] = true;
    graph.forEachNeighbor(key, function (other) { set[other] = true; });
    return set;
  }

  function nodeReducer(key, attributes) {
    if (!selected) return attributes;
    var near = renderer.kbNear || {};
    if (key === selected) return Object.assign({}, attributes, { highlighted: true, zIndex: 2 });
    if (near[key]) {
      return Object.assign({}, attributes, { zIndex: 1, forceLabel: renderer.kbLabelNear });
    }
    return Object.assign({}, attributes, { color: DIMMED, label: "", zIndex: 0 });
  }

  function edgeReducer(key, attributes) {
    if (!selected) return attributes;
    var ends = graph.extremities(key);
    if (ends[0] === selected || ends[1] === selected) {
      return Object.assign({}, attributes, { color: "#57606a", size: 2, zIndex: 1 });
    }
    return Object.assign({}, attributes, { color: "#f1f3f5", zIndex: 0 });
  }

  // -- labels ---------------------------------------------------------------------------
  // sigma draws a label right of its node, so the fitted graph's rightmost nodes had their
  // labels cut at the drawing area's edge, under the side panel. These draw it on the left
  // instead when it would not fit on the right but fits on the left (else on the side with
  // more room), for the plain label and the hover box alike.

  function labelFont(settings) {
    return settings.labelWeight + " " + settings.labelSize + "px " + settings.labelFont;
  }

  function labelStart(context, data, width) {
    var area = context.canvas.clientWidth || context.canvas.width / (window.devicePixelRatio || 1);
    var right = data.x + data.size + LABEL_GAP;
    var left = data.x - data.size - LABEL_GAP - width;
    if (right + width <= area || (left < 0 && area - right >= data.x - data.size - LABEL_GAP)) {
      return right;
    }
    return left;
  }

  function drawLabel(context, data, settings) {
    if (!data.label) return;
    var colour = settings.labelColor.attribute
      ? data[settings.labelColor.attribute] || settings.labelColor.color || "#000"
      : settings.labelColor.color;
    context.font = labelFont(settings);
    context.fillStyle = colour;
    var x = labelStart(context, data, context.measureText(data.label).width);
    context.fillText(data.label, x, data.y + settings.labelSize / 3);
  }

  function drawHover(context, data, settings) {
    var size = settings.labelSize;
    context.font = labelFont(settings);
    context.fillStyle = "#fff";
    context.shadowOffsetX = 0;
    context.shadowOffsetY = 0;
    context.shadowBlur = 8;
    context.shadowColor = "#000";
    context.beginPath();
    context.arc(data.x, data.y, Math.max(data.size, size / 2) + HOVER_PADDING, 0, Math.PI * 2);
    if (typeof data.label === "string" && data.label) {
      var width = context.measureText(data.label).width;
      var x = labelStart(context, data, width);
      var from = Math.min(x - HOVER_PADDING, data.x);
      var to = Math.max(x + width + HOVER_PADDING, data.x);
      context.rect(from, data.y - size / 2 - HOVER_PADDING, to - from, size + 2 * HOVER_PADDING);
    }
    context.fill();
    context.shadowBlur = 0;
    drawLabel(context, data, settings);
  }

  // The layout runs on a copy of the graph: the worker's many small steps move the copy, and
  // its positions reach the drawn graph every LAYOUT_FRAME_MS, so sigma redraws a few times a
  // second instead of after every step and the page stays responsive while it settles.
  function copyPositions() {
    if (!layout) return;
    var source = layout.kbGraph;
    graph.updateEachNodeAttributes(function (key, attributes) {
      if (source.hasNode(key)) {
        attributes.x = source.getNodeAttribute(key, "x");
        attributes.y = source.getNodeAttribute(key, "y");
      }
      return attributes;
    }, { attributes: ["x", "y"] });
  }

  function startLayout(ms) {
    stopLayout();
    if (graph.order < 2) return;
    var FA2 = window.graphologyForceAtlas2;
    var copy = graph.copy();
    var settings = FA2.forceAtlas2.inferSettings(copy);
    settings.barnesHutOptimize = copy.order > 500;
    settings.gravity = LAYOUT_GRAVITY;
    layout = new FA2.FA2Layout(copy, { settings: settings });
    layout.kbGraph = copy;
    layout.start();
    layoutTicker = window.setInterval(copyPositions, LAYOUT_FRAME_MS);
    layoutTimer = window.setTimeout(stopLayout, ms);
    showLayoutState();
  }

  function showLayoutState() {
    el.layoutToggle.disabled = !graph || graph.order < 2;
    el.layoutToggle.textContent = layout ? "Stop layout" : "Run layout";
  }

  function stopLayout() {
    if (layoutTimer) window.clearTimeout(layoutTimer);
    if (layoutTicker) window.clearInterval(layoutTicker);
    layoutTimer = layoutTicker = null;
    if (layout) {
      layout.stop();
      copyPositions();
      layout.kill();
      layout = null;
    }
    showLayoutState();
  }

  function build(data) {
    stopLayout();
    if (renderer) renderer.kill();
    selected = null;
    view = data;
    graph = new window.graphology.MultiDirectedGraph();
    addData(data, null);
    renderer = new window.Sigma(graph, el.graph, {
      defaultEdgeType: "arrow",
      allowInvalidContainer: true,
      labelRenderedSizeThreshold: 9,
      labelDensity: 0.7,
      // software-rendered WebGL redraws a large graph slowly while the camera moves
      // (benchmarks/results/graph_page.md): draw only the nodes until it stops
      hideEdgesOnMove: graph.size > HIDE_ON_MOVE_EDGES,
      hideLabelsOnMove: graph.size > HIDE_ON_MOVE_EDGES,
      zIndex: true,
      defaultDrawNodeLabel: drawLabel,
      defaultDrawNodeHover: drawHover,
      nodeReducer: nodeReducer,
      edgeReducer: edgeReducer,
    });
    renderer.on("clickNode", function (event) { select(event.node, true); });
    renderer.on("clickStage", function () { select(null, false); });
    if (api.firstPaintMs === null && graph.order > 0) {
      renderer.once("afterRender", function () {
        api.firstPaintMs = Math.round(performance.now());
      });
    }
    renderer.refresh();
    updateCounts();
    updateNames();
    drawLegend();
    updateFilters(data);
    renderDetails();
    startLayout(Math.min(LAYOUT_MAX_MS, LAYOUT_MIN_MS + graph.order * 2));
  }

  function load(query) {
    showMessage("");
    el.counts.textContent = "Loading…";
    return fetchView(query).then(function (data) {
      build(data);
      api.loads += 1;
      api.ready = true;
      if (query.seed && graph.hasNode(data.query.seed)) select(data.query.seed, true);
    }).catch(function (error) {
      el.counts.textContent = "";
      showMessage("The graph could not be loaded: " + error.message);
      api.ready = true;
    });
  }

  function reloadWithFilters() {
    var query = {};
    FILTERS.forEach(function (name) {
      if (selects[name].value) query[name] = selects[name].value;
    });
    if (params.limit) query.limit = params.limit;
    params = query;
    var url = new URL(window.location.href);
    url.search = apiUrl(query).search;
    window.history.replaceState(null, "", url);
    return load(query);
  }

  // -- selection and details ------------------------------------------------------------

  function focus(key) {
    var data = renderer.getNodeDisplayData(key);
    if (data) renderer.getCamera().animate({ x: data.x, y: data.y, ratio: 0.4 }, { duration: 400 });
  }

  function select(key, moveCamera) {
    selected = key && graph.hasNode(key) ? key : null;
    renderer.kbNear = selected ? neighbourhoodOf(selected) : null;
    renderer.kbLabelNear =
      Boolean(selected) && graph.neighbors(selected).length <= LABEL_NEIGHBOURS;
    renderer.refresh();
    if (selected && moveCamera) focus(selected);
    renderDetails();
  }

  function text(tag, className, value) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    node.textContent = value;
    return node;
  }

  function nodeButton(key) {
    var button = text("button", "link", graph.getNodeAttribute(key, "label"));
    button.type = "button";
    button.dataset.node = key;
    button.addEventListener("click", function () { select(key, true); });
    return button;
  }

  function citationLine(attributes) {
    var source = document.createElement("p");
    source.className = "source";
    var where = attributes.documentName + (attributes.pageText ? ", " + attributes.pageText : "");
    if (attributes.citation) {
      var link = text("a", "citation", where);
      link.href = attributes.citation;
      link.target = "_blank";
      link.rel = "noopener";
      source.append(link);
    } else {
      source.append(document.createTextNode(where));
    }
    source.append(document.createTextNode(" · chunk " + attributes.chunkId));
    return source;
  }

  // One item per relationship (type, direction and neighbour): the same relationship found in
  // several chunks lists each chunk's sentence and citation under one heading.
  function relationshipItem(group) {
    var item = document.createElement("li");
    var head = document.createElement("div");
    head.append(
      text("span", "type", group.type),
      document.createTextNode(group.outgoing ? " → " : " ← "),
      nodeButton(group.other)
    );
    item.append(head);
    group.edges.forEach(function (edge) {
      var attributes = graph.getEdgeAttributes(edge);
      if (attributes.description) item.append(text("p", "description", attributes.description));
      item.append(citationLine(attributes));
    });
    return item;
  }

  function relationshipGroups(key) {
    var groups = {};
    var order = [];
    graph.edges(key).forEach(function (edge) {
      var ends = graph.extremities(edge);
      var outgoing = ends[0] === key;
      var other = outgoing ? ends[1] : ends[0];
      var type = graph.getEdgeAttribute(edge, "relationshipType");
      var id = JSON.stringify([type, outgoing, other]);
      if (!groups[id]) {
        groups[id] = { type: type, outgoing: outgoing, other: other, edges: [],
                       name: graph.getNodeAttribute(other, "label").toLowerCase() };
        order.push(groups[id]);
      }
      groups[id].edges.push(edge);
    });
    order.sort(function (a, b) {  // by relationship type, then neighbour name
      if (a.type !== b.type) return a.type < b.type ? -1 : 1;
      return a.name < b.name ? -1 : a.name > b.name ? 1 : 0;
    });
    order.forEach(function (group) {  // each group's chunks in document and page order
      group.edges.sort(function (a, b) {
        var x = graph.getEdgeAttributes(a), y = graph.getEdgeAttributes(b);
        if (x.documentName !== y.documentName) return x.documentName < y.documentName ? -1 : 1;
        return (x.page || 0) - (y.page || 0);
      });
    });
    return order;
  }

  function renderDetails() {
    el.details.replaceChildren();
    if (!selected) {
      el.details.append(text("p", "hint", "Click an entity to list its relationships."));
      return;
    }
    var a = graph.getNodeAttributes(selected);
    el.details.append(
      text("h2", "entity-name", a.label),
      text("p", "entity-type", a.entityType + " · " +
        plural(a.degree, "relationship", "relationships") + " in the graph")
    );
    if (a.description) el.details.append(text("p", "", a.description));
    var expand = text("button", "expand", "Expand neighbours");
    expand.type = "button";
    expand.addEventListener("click", function () { expandNode(selected); });
    el.details.append(expand);
    var list = document.createElement("ul");
    list.className = "relationships";
    var groups = relationshipGroups(selected);
    groups.forEach(function (group) { list.append(relationshipItem(group)); });
    var cited = graph.edges(selected).length;
    var heading = plural(groups.length, "relationship", "relationships") + " shown" +
      (cited > groups.length ? " (" + plural(cited, "citation", "citations") + ")" : "");
    el.details.append(text("h3", "", heading), list);
  }

  function expandNode(key) {
    var query = { seed: key, depth: 1 };
    FILTERS.forEach(function (name) { if (params[name]) query[name] = params[name]; });
    showMessage("");
    return fetchView(query).then(function (data) {
      var before = graph.size;
      addData(data, key);
      updateCounts();
      updateNames();
      drawLegend();
      select(key, false);
      if (graph.size > before) startLayout(EXPAND_LAYOUT_MS);
    }).catch(function (error) {
      showMessage("Could not expand " + key + ": " + error.message);
    });
  }

  // -- search ---------------------------------------------------------------------------

  function findNode(query) {
    var wanted = query.trim().toLowerCase();
    if (!wanted) return null;
    var best = null;
    graph.forEachNode(function (key, a) {
      var name = a.label.toLowerCase();
      var score = name === wanted || key === wanted ? 3 : name.indexOf(wanted) === 0 ? 2
        : name.indexOf(wanted) >= 0 ? 1 : 0;
      var better = !best || score > best.score ||
        (score === best.score && a.degree > best.degree);
      if (score && better) {
        best = { key: key, score: score, degree: a.degree };
      }
    });
    return best ? best.key : null;
  }

  el.search.addEventListener("submit", function (event) {
    event.preventDefault();
    var query = el.searchInput.value;
    if (!query.trim() || !graph) return;
    var key = findNode(query);
    if (key) {
      showMessage("");
      select(key, true);
      return;
    }
    // not in this view: ask the server for the entity's neighbourhood (its key is the name,
    // normalised server-side)
    var seedQuery = { seed: query, depth: 1 };
    FILTERS.forEach(function (name) { if (params[name]) seedQuery[name] = params[name]; });
    fetchView(seedQuery).then(function (data) {
      if (!data.nodes.length) {
        showMessage("No entity named \u201c" + query.trim() + "\u201d in this view or the graph.");
        return;
      }
      addData(data, null);
      updateCounts();
      updateNames();
      drawLegend();
      select(data.query.seed, true);
      startLayout(EXPAND_LAYOUT_MS);
    }).catch(function (error) { showMessage(error.message); });
  });

  el.layoutToggle.addEventListener("click", function () {
    if (layout) stopLayout();
    else if (graph) startLayout(LAYOUT_MAX_MS);
  });

  [el.doc, el.entityType, el.relationshipType].forEach(function (select) {
    select.addEventListener("change", reloadWithFilters);
  });

  load(params);
})();
