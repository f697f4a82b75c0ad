"""Wire models of the Vertex AI messages: proto3 JSON in, canonical proto3 JSON out."""
