package server

// Routes returns the patterns of the API's routes as s registered them.
func Routes(s *Server) []string { return s.apiRoutes }
